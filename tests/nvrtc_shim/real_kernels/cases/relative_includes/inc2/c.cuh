#pragma once
#define C_VAL 1.0f
