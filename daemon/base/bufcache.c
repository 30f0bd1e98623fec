/* Per-thread cache of large data buffers (see include/tandem/bufcache.h). */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "tandem/bufcache.h"

#define BUF_ALIGN        4096
#define CLASS_MIN_SHIFT  12 /* 4 KiB */
#define CLASS_MAX_SHIFT  24 /* 16 MiB: the largest transfer a command may carry */
#define CLASSES          (CLASS_MAX_SHIFT - CLASS_MIN_SHIFT + 1)
#define PER_CLASS_MAX    8
#define THREAD_CACHE_MAX (64u << 20)

struct free_buf {
        struct free_buf *next;
};

struct buf_cache {
        struct free_buf *lists[CLASSES];
        unsigned counts[CLASSES];
        size_t bytes;
};

static __thread struct buf_cache cache;
static __thread bool cache_armed; /* the thread-exit destructor is set for this thread */
static pthread_key_t drain_key;
static pthread_once_t drain_once = PTHREAD_ONCE_INIT;

static void drain_at_thread_exit(void *unused)
{
        (void)unused;
        tdm_buf_cache_drain();
}

static void drain_key_create(void)
{
        pthread_key_create(&drain_key, drain_at_thread_exit);
}

/* Size class index for len, or -1 when it is beyond the largest class. */
static int size_class(size_t len)
{
        for (int c = 0; c < CLASSES; c++)
                if (len <= (size_t)1 << (CLASS_MIN_SHIFT + c))
                        return c;
        return -1;
}

void *tdm_buf_get(size_t len, size_t *cap)
{
        int c = size_class(len);
        if (c < 0) {
                /* Uncached: rounded to the alignment so the cap is exact. */
                size_t size = (len + BUF_ALIGN - 1) & ~(size_t)(BUF_ALIGN - 1);
                void *buf = NULL;
                if (posix_memalign(&buf, BUF_ALIGN, size))
                        return NULL;
                *cap = size;
                return buf;
        }
        size_t size = (size_t)1 << (CLASS_MIN_SHIFT + c);
        *cap = size;
        struct free_buf *f = cache.lists[c];
        if (f) {
                cache.lists[c] = f->next;
                cache.counts[c]--;
                cache.bytes -= size;
                return f;
        }
        void *buf = NULL;
        if (posix_memalign(&buf, BUF_ALIGN, size))
                return NULL;
        return buf;
}

void tdm_buf_put(void *buf, size_t cap)
{
        if (!buf)
                return;
        int c = size_class(cap);
        if (c < 0 || cap != (size_t)1 << (CLASS_MIN_SHIFT + c) ||
            cache.counts[c] >= PER_CLASS_MAX || cache.bytes + cap > THREAD_CACHE_MAX) {
                free(buf);
                return;
        }
        if (!cache_armed) {
                pthread_once(&drain_once, drain_key_create);
                pthread_setspecific(drain_key, &cache); /* any non-NULL value arms it */
                cache_armed = true;
        }
        struct free_buf *f = buf;
        f->next = cache.lists[c];
        cache.lists[c] = f;
        cache.counts[c]++;
        cache.bytes += cap;
}

void tdm_buf_cache_drain(void)
{
        for (int c = 0; c < CLASSES; c++) {
                while (cache.lists[c]) {
                        struct free_buf *f = cache.lists[c];
                        cache.lists[c] = f->next;
                        free(f);
                }
                cache.counts[c] = 0;
        }
        cache.bytes = 0;
}
