/* Spec parsing ("kind:dev[,key=value...]") and the open path's messages for bad specs:
 * exact error text, since users read it. */
#include "io_internal.h"

#include <errno.h>
#include <string.h>

#include "check.h"

static char err[256];

static int parse(const char *spec, struct ipk_io_args *a)
{
	err[0] = '\0';
	return ipk_io_parse(spec, a, err, sizeof(err));
}

static void test_spec_kind_dev_options_parsed(void)
{
	struct ipk_io_args a;

	CHECK_EQ(parse("afpacket:veth1,fanout=4,vnet=0,pcap=/tmp/x.pcap", &a), 0);
	CHECK(strcmp(a.kind, "afpacket") == 0);
	CHECK(strcmp(a.dev, "veth1") == 0);
	CHECK_EQ(a.nkv, 3);
	CHECK(strcmp(ipk_io_arg(&a, "pcap"), "/tmp/x.pcap") == 0);
	CHECK_EQ(ipk_io_arg_int(&a, "fanout", 1, err, sizeof(err)), 4);
	CHECK_EQ(ipk_io_arg_int(&a, "frames", 77, err, sizeof(err)), 77);
	CHECK_EQ(ipk_io_arg_bool(&a, "vnet", 1, err, sizeof(err)), 0);
	CHECK(ipk_io_arg(&a, "queue") == NULL);
}

static void test_spec_device_only(void)
{
	struct ipk_io_args a;

	CHECK_EQ(parse("tap:ipk0", &a), 0);
	CHECK(strcmp(a.dev, "ipk0") == 0);
	CHECK_EQ(a.nkv, 0);
}

static void test_spec_malformed_rejected_with_message(void)
{
	struct ipk_io_args a;

	CHECK_EQ(parse("", &a), -EINVAL);
	CHECK(strcmp(err, "io: empty spec (expected kind:device[,key=value...])") == 0);
	CHECK_EQ(parse("veth1", &a), -EINVAL);
	CHECK(strcmp(err, "io: spec 'veth1' has no kind (expected kind:device[,key=value...])") == 0);
	CHECK_EQ(parse(":veth1", &a), -EINVAL);
	CHECK_EQ(parse("tap:", &a), -EINVAL);
	CHECK(strcmp(err, "io: spec 'tap:' names no device") == 0);
	CHECK_EQ(parse("tap:,vnet=1", &a), -EINVAL);
	CHECK_EQ(parse("TAP:x", &a), -EINVAL);
	CHECK(strcmp(err, "io: bad backend kind 'TAP'") == 0);
	CHECK_EQ(parse("tap:x,vnet", &a), -EINVAL);
	CHECK(strcmp(err, "io: option 'vnet' is not key=value") == 0);
	CHECK_EQ(parse("tap:x,vnet=", &a), -EINVAL);
	CHECK(strcmp(err, "io: option 'vnet=' needs a key and a value") == 0);
	CHECK_EQ(parse("tap:x,=1", &a), -EINVAL);
	CHECK_EQ(parse("tap:x,,vnet=1", &a), -EINVAL);
	CHECK_EQ(parse("tap:x,vnet=1,", &a), -EINVAL);
	CHECK_EQ(parse("tap:x,vnet=1,vnet=0", &a), -EINVAL);
	CHECK(strcmp(err, "io: option 'vnet' given twice") == 0);
	CHECK_EQ(parse("tap:a=b", &a), -EINVAL);
	CHECK(strcmp(err, "io: bad device name 'a=b'") == 0);
}

static void test_spec_limits_enforced(void)
{
	struct ipk_io_args a;
	char spec[1024];
	int i, at;

	at = snprintf(spec, sizeof(spec), "tap:x");
	for (i = 0; i < IPK_IO_MAX_KV + 1; i++)
		at += snprintf(spec + at, sizeof(spec) - (size_t)at, ",k%d=1", i);
	CHECK_EQ(parse(spec, &a), -EINVAL);
	CHECK(strcmp(err, "io: more than 16 options") == 0);
	snprintf(spec, sizeof(spec), "tap:%0130d", 0);  /* dev holds 127 characters */
	CHECK_EQ(parse(spec, &a), -EINVAL);
	CHECK(strstr(err, "device name too long") != NULL);
	/* only virtio's device names a transport with '=' and '/' */
	CHECK_EQ(parse("virtio:vhost-user=/tmp/a.sock,csum=0", &a), 0);
	CHECK(strcmp(a.dev, "vhost-user=/tmp/a.sock") == 0);
	CHECK_EQ(parse("tap:a=b", &a), -EINVAL);
	CHECK_EQ(parse("tap:/dev/x", &a), -EINVAL);
	snprintf(spec, sizeof(spec), "averyveryverylongkind:x");
	CHECK_EQ(parse(spec, &a), -EINVAL);
	CHECK(strstr(err, "kind too long") != NULL);
	snprintf(spec, sizeof(spec), "tap:x,pcap=%0200d", 0);
	CHECK_EQ(parse(spec, &a), -EINVAL);
	CHECK(strcmp(err, "io: option 'pcap' too long") == 0);
}

static void test_spec_numbers_and_bools_checked(void)
{
	struct ipk_io_args a;

	CHECK_EQ(parse("afpacket:v,frames=12x,fanout=99999999999,vnet=2,q=", &a), -EINVAL);
	CHECK_EQ(parse("afpacket:v,frames=12x,fanout=99999999999,vnet=2", &a), 0);
	CHECK_EQ(ipk_io_arg_int(&a, "frames", 1, err, sizeof(err)), -1);
	CHECK(strcmp(err, "afpacket: option frames=12x is not a number in 0..2147483647") == 0);
	CHECK_EQ(ipk_io_arg_int(&a, "fanout", 1, err, sizeof(err)), -1);
	CHECK_EQ(ipk_io_arg_bool(&a, "vnet", 1, err, sizeof(err)), -1);
	CHECK(strcmp(err, "afpacket: option vnet=2 must be 0 or 1") == 0);
}

static void test_spec_unknown_option_named(void)
{
	static const char *const known[] = { "vnet", "offload", NULL };
	struct ipk_io_args a;

	CHECK_EQ(parse("tap:x,vnet=1,speed=9", &a), 0);
	CHECK_EQ(ipk_io_arg_check(&a, known, err, sizeof(err)), -EINVAL);
	CHECK(strcmp(err, "tap: unknown option 'speed'") == 0);
	CHECK_EQ(parse("tap:x,offload=0", &a), 0);
	CHECK_EQ(ipk_io_arg_check(&a, known, err, sizeof(err)), 0);
}

static void test_open_unknown_kind_lists_available(void)
{
	struct ipk_pool *p = ipk_pool_create(NULL, NULL, 0);

	CHECK(ipk_io_open("nosuch:x", p, err, sizeof(err)) == NULL);
	CHECK(strncmp(err, "io: unknown backend kind 'nosuch' (available: ", 46) == 0);
#ifdef IPK_TEST_HAVE_DPDK
	/* compiled in: options are checked before EAL starts */
	CHECK(ipk_io_open("dpdk:0,queues=99", p, err, sizeof(err)) == NULL);
	CHECK(strcmp(err, "dpdk:0: need queue < queues <= 16 (queue=0 queues=99)") == 0);
	CHECK(ipk_io_open("dpdk:0,speed=9", p, err, sizeof(err)) == NULL);
	CHECK(strcmp(err, "dpdk: unknown option 'speed'") == 0);
#else
	CHECK(ipk_io_open("dpdk:0000:01:00.0", p, err, sizeof(err)) == NULL);
	CHECK(strcmp(err, "io: backend 'dpdk' is not compiled into this build") == 0);
#endif
	CHECK(ipk_io_open("tap:x", NULL, err, sizeof(err)) == NULL);
	CHECK(strcmp(err, "io: no packet pool given") == 0);
	ipk_pool_destroy(p);
}

/* The runtime sizes its pool from afxdp's frame=N before opening the backend. */
static void test_spec_buf_size_from_afxdp_frame(void)
{
	CHECK_EQ(ipk_io_spec_buf_size("afxdp:veth1,mode=skb,frame=4096"), 4096);
	CHECK_EQ(ipk_io_spec_buf_size("afxdp:veth1,mode=skb"), 0);
	CHECK_EQ(ipk_io_spec_buf_size("afpacket:veth1,frame=4096"), 0);
	CHECK_EQ(ipk_io_spec_buf_size("afxdp:veth1,frame=x"), 0);
	CHECK_EQ(ipk_io_spec_buf_size("afxdp"), 0);
}

int main(void)
{
	RUN(test_spec_kind_dev_options_parsed);
	RUN(test_spec_device_only);
	RUN(test_spec_malformed_rejected_with_message);
	RUN(test_spec_limits_enforced);
	RUN(test_spec_numbers_and_bools_checked);
	RUN(test_spec_unknown_option_named);
	RUN(test_open_unknown_kind_lists_available);
	RUN(test_spec_buf_size_from_afxdp_frame);
	return check_summary();
}
