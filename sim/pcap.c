/*
 * Classic libpcap file format (the one every tool reads): a 24-byte file header,
 * then a 16-byte record header before each frame. We write little-endian fields
 * regardless of host so a seed gives the same bytes on every machine; readers
 * detect byte order from the magic. Magic 0xa1b23c4d = nanosecond timestamps.
 */
#include "sim.h"

static void le32(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
	p[2] = (uint8_t)(v >> 16);
	p[3] = (uint8_t)(v >> 24);
}

static void le16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)v;
	p[1] = (uint8_t)(v >> 8);
}

uint32_t sim_pcap_file_header(uint8_t b[24], uint32_t linktype, uint32_t snaplen)
{
	le32(b, SIM_PCAP_MAGIC_NS);
	le16(b + 4, 2);  /* version 2.4 */
	le16(b + 6, 4);
	le32(b + 8, 0);  /* thiszone: virtual time is UTC */
	le32(b + 12, 0); /* sigfigs */
	le32(b + 16, snaplen);
	le32(b + 20, linktype);
	return 24;
}

uint32_t sim_pcap_record_header(uint8_t b[16], uint64_t t_ns, uint32_t caplen,
                                uint32_t origlen)
{
	le32(b, (uint32_t)(t_ns / 1000000000u));
	le32(b + 4, (uint32_t)(t_ns % 1000000000u));
	le32(b + 8, caplen);
	le32(b + 12, origlen);
	return 16;
}
