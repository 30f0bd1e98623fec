/*
 * One log line as text, in the layout libqb writes with the format "%T %p: %b" (the layout
 * corosync's and Pacemaker's lines have too, so a failover reads lined up across all three):
 * "Dec 03 21:39:43.123 notice: the message\n", local time, milliseconds.
 */
#ifndef TANDEM_LOG_LINE_H
#define TANDEM_LOG_LINE_H

#include <stddef.h>
#include <time.h>

/* libqb's name of a syslog priority ("error", "warning", ...); "debug" past the end. */
const char *log_line_prio_name(int prio);

/* Writes the line, newline included, into out (cap >= 2); text longer than fits is cut. Returns
 * its length. */
size_t log_line_format(char *out, size_t cap, const struct timespec *when, int prio,
                       const char *text);

#endif
