/*
 * A tiny test harness shared by every C test program.
 *
 *   static void test_listen_syn_gets_synack(void) { CHECK(x == 1); CHECK_EQ(a, b); }
 *   int main(void) { RUN(test_listen_syn_gets_synack); return check_summary(); }
 *
 * A failed CHECK prints file:line and the expression and marks the current test
 * failed (the test goes on, so one run shows every broken expectation). Each RUN
 * prints "ok <name>" or "FAIL <name>"; check_summary prints "N passed, N failed" and
 * returns the exit status (0 only when everything passed and something ran).
 */
#ifndef IPKIT_TEST_CHECK_H
#define IPKIT_TEST_CHECK_H

#include <stdio.h>
#include <stdint.h>

static int check_failed_now_;
static int check_passed_, check_failed_;

#define CHECK(expr)                                                              \
	do {                                                                     \
		if (!(expr)) {                                                   \
			fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__,   \
			        __LINE__, #expr);                                \
			check_failed_now_ = 1;                                   \
		}                                                                \
	} while (0)

#define CHECK_EQ(a, b)                                                           \
	do {                                                                     \
		unsigned long long a_ = (unsigned long long)(a);                 \
		unsigned long long b_ = (unsigned long long)(b);                 \
		if (a_ != b_) {                                                  \
			fprintf(stderr, "%s:%d: CHECK_EQ failed: %s == %s (%llu vs %llu)\n", \
			        __FILE__, __LINE__, #a, #b, a_, b_);             \
			check_failed_now_ = 1;                                   \
		}                                                                \
	} while (0)

#define RUN(fn)                                                                  \
	do {                                                                     \
		check_failed_now_ = 0;                                           \
		fn();                                                            \
		if (check_failed_now_) {                                         \
			check_failed_++;                                         \
			printf("FAIL %s\n", #fn);                                \
		} else {                                                         \
			check_passed_++;                                         \
			printf("ok %s\n", #fn);                                  \
		}                                                                \
		fflush(stdout);                                                  \
	} while (0)

static inline int check_summary(void)
{
	printf("%d passed, %d failed\n", check_passed_, check_failed_);
	return (check_failed_ == 0 && check_passed_ > 0) ? 0 : 1;
}

#endif
