#pragma once
#define HISTOGRAM_TRACE_ON 1
