/*
 * Per-thread cache of large, page-aligned data buffers. Each I/O of a connection is
 * allocated and freed on its worker thread; reusing buffers spares the page faults and
 * page clearing that a fresh mmap'd buffer costs on every large read or write.
 */
#ifndef TANDEM_BUFCACHE_H
#define TANDEM_BUFCACHE_H

#include <stddef.h>

/* A buffer of at least len bytes, 4096-aligned; *cap receives its real size. NULL on ENOMEM. */
void *tdm_buf_get(size_t len, size_t *cap);
/* Return a buffer from tdm_buf_get (with the cap it gave) to this thread's cache. */
void tdm_buf_put(void *buf, size_t cap);
/* Free what this thread's cache holds (thread exit does it too). */
void tdm_buf_cache_drain(void);

#endif
