#define OPT 5.0f
