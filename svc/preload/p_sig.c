/*
 * libipkit-preload: SA_RESTART. Linux restarts a blocking socket call (accept,
 * connect, recv, send and their kin) that a handler installed with SA_RESTART
 * interrupted, unless the socket has a timeout (signal(7), "Interruption of system
 * calls and library functions by signal handlers"); poll, select and epoll_wait are
 * never restarted. The shim sleeps in poll, which always says EINTR, so it must
 * know which signal interrupted it: every handler the program installs runs
 * through a trampoline that records the signal in a thread-local variable, and the
 * program sees its own handler in every answer of sigaction/signal.
 */
#include <errno.h>
#include <dlfcn.h>
#include <signal.h>
#include <string.h>

#include "preload.h"

static int (*r_sigaction)(int, const struct sigaction *, struct sigaction *);
static struct sigaction user_act[_NSIG];
static pthread_mutex_t s_mu = PTHREAD_MUTEX_INITIALIZER;
static __thread int last_sig;

static void pl_sig_resolve(void)
{
	if (!r_sigaction) {
		void *p = dlsym(RTLD_NEXT, "sigaction");
		memcpy(&r_sigaction, &p, sizeof p);
	}
}

/* The program's handler, called as it asked (one or three arguments). Reads the
 * table without a lock: a handler runs while its entry is the one installed. */
static void pl_tramp(int sig, siginfo_t *si, void *uc)
{
	const struct sigaction *a = &user_act[sig];
	int saved = errno;
	last_sig = sig;
	errno = saved;
	if (a->sa_flags & SA_SIGINFO)
		a->sa_sigaction(sig, si, uc);
	else if (a->sa_handler != SIG_DFL && a->sa_handler != SIG_IGN)
		a->sa_handler(sig);
}

static int pl_wrappable(const struct sigaction *a)
{
	if (a->sa_flags & SA_SIGINFO)
		return a->sa_sigaction != NULL;
	return a->sa_handler != SIG_DFL && a->sa_handler != SIG_IGN;
}

int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	struct sigaction prev, k;
	int rc;
	pl_sig_resolve();
	if (sig <= 0 || sig >= _NSIG)
		return r_sigaction(sig, act, old);
	pthread_mutex_lock(&s_mu);
	prev = user_act[sig];
	if (act && pl_wrappable(act)) {
		k = *act;
		k.sa_flags |= SA_SIGINFO;
		k.sa_sigaction = pl_tramp;
		user_act[sig] = *act;
		rc = r_sigaction(sig, &k, old);
	} else {
		rc = r_sigaction(sig, act, old);
		if (rc == 0 && act)
			user_act[sig] = *act;
	}
	if (rc < 0 && act)
		user_act[sig] = prev;
	/* the program sees its own handler, never the trampoline */
	if (rc == 0 && old && old->sa_sigaction == pl_tramp && (old->sa_flags & SA_SIGINFO))
		*old = prev;
	pthread_mutex_unlock(&s_mu);
	return rc;
}

/* glibc's signal() calls its internal sigaction, not ours: BSD semantics
 * (SA_RESTART) as glibc's signal() gives. */
sighandler_t signal(int sig, sighandler_t h)
{
	struct sigaction a, o;
	memset(&a, 0, sizeof a);
	a.sa_handler = h;
	a.sa_flags = SA_RESTART;
	sigemptyset(&a.sa_mask);
	sigaddset(&a.sa_mask, sig > 0 && sig < _NSIG ? sig : SIGUSR1);
	if (sigaction(sig, &a, &o) < 0)
		return SIG_ERR;
	return o.sa_handler;
}

void pl_sig_clear(void) { last_sig = 0; }

/* After EINTR from the shim's sleep: restart (1) when the handler that ran asked
 * SA_RESTART and the caller has no timeout, else report EINTR (0). */
int pl_sig_restart(int has_timeout)
{
	int sig = last_sig;
	if (has_timeout || sig <= 0 || sig >= _NSIG)
		return 0;
	return (user_act[sig].sa_flags & SA_RESTART) != 0;
}
