/* The same signature test compiled as C++ (issue 20, item 2). */
#include "test_iip_signatures.c"
