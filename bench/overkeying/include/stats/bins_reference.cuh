#pragma once
#error a reference implementation, not for kernels
