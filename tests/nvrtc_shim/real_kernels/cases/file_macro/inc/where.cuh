#define WHERE __FILE__
