/*
 * Reload (daemon/admin/reload.c): the config file read again and its differences from the
 * running configuration applied live, as tandemctl edits apply them. Control thread only
 * (tandemctl reload, and SIGHUP through the main loop).
 */
#ifndef TANDEM_RELOAD_H
#define TANDEM_RELOAD_H

#include <stddef.h>

/* Called once per applied change with its description, in order. */
typedef void (*tdm_reload_report)(void *arg, const char *change);

/*
 * Reads the file tandemd saves to, refuses it (nothing applied) when it does not load or
 * changes what cannot change live, and applies the rest one change at a time. 0, or -errno
 * with err naming the field (a change that failed after others applied says how many did).
 */
int tdm_reload(tdm_reload_report report, void *arg, char *err, size_t errlen);

#endif
