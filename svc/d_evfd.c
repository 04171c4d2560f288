/*
 * ipkitd: the app's wake eventfd (svc/proto.h, region line 2). A thread of the
 * app that sleeps in the kernel (epoll_wait) rather than on the app's futex holds
 * this eventfd in its set and raises app_waiting.ev; after a pass that posted, the
 * daemon writes it. libipkit-preload's epoll_wait so takes its completions itself,
 * with no library thread between the daemon and the program (one wake-up, not
 * a futex wake-up of the pump and then the pump's eventfd write).
 *
 * Trust: ev is the app's (untrusted): a wrong value costs the app one write per
 * pass that posted to it, no more. The eventfd is the daemon's own (made here,
 * non-blocking): an app that fills its counter (a write of 2^64-2) only loses its
 * own wake-ups (EAGAIN, ignored).
 */
#include "daemon.h"

#include <errno.h>
#include <sys/eventfd.h>
#include <unistd.h>

int d_evfd_make(struct d_app *a)
{
	a->ev_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	return a->ev_fd < 0 ? -errno : 0;
}

__thread int d_ev_send;

void d_evfd_send_done(struct d_sock *s, uint64_t user_data, int32_t res)
{
	d_ev_send = 1;
	d_op_done(s, user_data, res);
	d_ev_send = 0;
}

/* After d_wake_apps' fence (the cq_tail and app_futex stores are visible before
 * ev is read; the app fences between raising ev and re-checking). `loud`: the
 * pass posted a completion other than a successful SEND's. ev_lazy is the app's
 * (untrusted): a wrong value only costs the app its own wake-ups. */
void d_evfd_wake(struct d_app *a, int loud)
{
	uint64_t one = 1;
	if (a->ev_fd < 0 || IPK_SVC_LOAD_RLX(&a->hdr->app_waiting.ev) == 0)
		return;
	if (!loud && IPK_SVC_LOAD_RLX(&a->hdr->app_waiting.ev_lazy) != 0)
		return;
	__atomic_add_fetch(&a->hdr->ev_wakes, 1, __ATOMIC_RELAXED);
	if (write(a->ev_fd, &one, sizeof one) < 0)
		return; /* EAGAIN: the app saturated it itself */
}

void d_evfd_close(struct d_app *a)
{
	if (a->ev_fd >= 0)
		close(a->ev_fd);
	a->ev_fd = -1;
}
