#pragma once
#error replaced by stats/bins.cuh
