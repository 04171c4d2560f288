/* A header with known documentation faults, for test_doc_check.py (not installed). */
#ifndef DOC_FIXTURE_H
#define DOC_FIXTURE_H

#ifdef __cplusplus
extern "C" {
#endif

/* Documented: returns 0 or IPK_EINVAL. */
int fx_documented(int x);

int fx_undocumented(int x);

/* fx_group_a / fx_group_b: a grouped comment that names both (returns 0). */
int fx_group_a(void);
int fx_group_b(void);

/* A grouped comment that names fx_group_c only; returns 0. */
int fx_group_c(void);
int fx_group_missed(void);

/* Says nothing of what comes back. */
int fx_no_return_doc(void);

/* A void function needs no words on its result. */
void fx_void(void);

int fx_trailing(void); /* a trailing comment does not count */

/* An inline helper, documented: returns v + 1. */
static inline int fx_inline_ok(int v) { return v + 1; }
static inline int fx_inline_bad(int v)
{
	return v - 1;
}

struct fx_ops {
	/* documented member */
	void (*fx_m_ok)(void *opaque);
	void (*fx_m_bad)(void *opaque);
	int plain_field; /* not a function: not checked */
};

/* The map cites a file that is gone: runtime/no_such_file.h */
void fx_cites(void);

#ifdef __cplusplus
}
#endif
#endif
