/*
 * include/ipkit/compat/iip.h alone (issue 20): nothing before it, nothing after it
 * but an empty main, as C99 and as C++17 with the build's -Werror. The header
 * compiles alone with IIP_COMPAT_LIBRARY (why only then: the comment above IIP_API
 * in the header); meson builds this file with it defined.
 */
#include <ipkit/compat/iip.h>

int main(void)
{
	return 0;
}
