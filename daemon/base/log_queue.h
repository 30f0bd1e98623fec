/*
 * The log queue: any thread formats its line and enqueues it; one writer thread hands the lines,
 * in order, to a write callback (log.c: stderr, the log file, syslog). A thread that logs never
 * waits for a write: a file on a stalled disk or a full stderr pipe holds the writer only, and
 * while it is held the queue fills and further lines are counted as dropped, then reported.
 */
#ifndef TANDEM_LOG_QUEUE_H
#define TANDEM_LOG_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <time.h>

#define LOG_QUEUE_LINE_MAX 512 /* as libqb's QB_LOG_MAX_LEN: longer lines are cut there anyway */

/* Writes one line. when: CLOCK_REALTIME when it was logged (a held writer writes it later).
 * A line with text NULL reports `dropped` lines lost while the queue was full. */
typedef void (*log_queue_write_fn)(int prio, const struct timespec *when, const char *text,
                                   unsigned long dropped);

/* Starts the writer; capacity: lines the queue holds. 0, or -errno (already started too). */
int log_queue_start(size_t capacity, log_queue_write_fn write);

/* Enqueues a copy of text (cut to LOG_QUEUE_LINE_MAX - 1). False when the queue is not started
 * (the caller writes the line itself); true otherwise, also when the line was dropped. */
bool log_queue_push(int prio, const char *text);

/* Waits (<= timeout_ms) until the writer has written everything enqueued so far. 0, or
 * -ETIMEDOUT while the writer is held. */
int log_queue_flush(int timeout_ms);

/* Writes what is queued and stops the writer; if it is held longer than timeout_ms the
 * writer is left behind (the process is ending) and -ETIMEDOUT returned. */
int log_queue_stop(int timeout_ms);

#endif
