// A variant chosen by -D VARIANT=double (saxpy_computed.cu).
#pragma once
#define SCALE 2.0f
