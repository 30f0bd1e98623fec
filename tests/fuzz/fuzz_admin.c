/*
 * The admin plane under fuzzing: the bytes of one IPC request (what tandemctl, or anything
 * that can reach the daemon's IPC endpoint, sends) through admin_dispatch(): protobuf-c
 * decode, the table of operations, the argument checks, the handler, on a live registry
 * made from a small configuration, reset after every input.
 *
 * Input: the request bytes (a tandem.admin.AdminRequest, or anything). Requests that decode
 * and would touch the file system outside this target's directory are steered into it
 * first: a LUN add gets a path in the directory (one of four names, chosen from its own
 * path), at most 4 MiB, thin and buffered; a resize at most 8 MiB. The request is then
 * encoded again (the rest of it unchanged) and dispatched; every other input is dispatched
 * as it is.
 *
 * Checks: a response always comes and decodes; ok exactly when errno_value is 0 and error is
 * empty, and a refusal gives a positive errno and a "field: reason" (which may quote the
 * request's own bytes); bytes that do
 * not decode are refused with EPROTO; after a request the configuration file the registry
 * saved (if any) loads again. Everything the daemon writes (the configuration, the LUNs'
 * state files and journals: state_dir) stays in this target's directory.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fuzz_util.h"
#include "tandem/admin_ipc.h"
#include "tandem/config.h"
#include "tandem/registry.h"

#define LUN_SIZE_MAX    (4ull << 20)
#define RESIZE_SIZE_MAX (8ull << 20)

static char dir[64];
static char conf[128];
static char paths[4][160];

static const char *const BASE = "listen = [ \"127.0.0.1:3260\" ]; state_dir = \"@D\";\n"
                                "targets = ( { iqn = \"iqn.2024-01.org.example:t1\";\n"
                                "  acl = [ \"ALL\" ]; luns = ( { lun = 0; path = \"@0\";\n"
                                "  size = \"1M\"; thin = true; } ); } );";

/* Everything in dir: the LUN files, the configuration, the LUNs' state files and journals. */
static void remove_files(void)
{
        DIR *dp = opendir(dir);
        if (!dp)
                return;
        struct dirent *e;
        char p[300];
        while ((e = readdir(dp))) {
                if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
                        snprintf(p, sizeof(p), "%s/%s", dir, e->d_name);
                        unlink(p);
                }
        }
        closedir(dp);
}

__attribute__((destructor)) static void remove_dir(void)
{
        if (!dir[0])
                return;
        remove_files();
        rmdir(dir);
}

static void registry_start(void)
{
        char text[1024], err[512] = "";
        const char *d = strstr(BASE, "@D"), *at = strstr(BASE, "@0");
        snprintf(text, sizeof(text), "%.*s%s%.*s%s%s", (int)(d - BASE), BASE, dir,
                 (int)(at - d - 2), d + 2, paths[0], at + 2);
        struct tdm_config c;
        FUZZ_ASSERT(tdm_config_parse_string(text, &c, err, sizeof(err)) == 0, "base: %s", err);
        FUZZ_ASSERT(tdm_registry_init(&c, conf, err, sizeof(err)) == 0, "registry: %s", err);
        tdm_config_free(&c);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
        (void)argc;
        (void)argv;
        snprintf(dir, sizeof(dir), "/dev/shm/tandem-fuzz-admin-XXXXXX");
        if (!mkdtemp(dir)) {
                snprintf(dir, sizeof(dir), "/tmp/tandem-fuzz-admin-XXXXXX");
                FUZZ_ASSERT(mkdtemp(dir) != NULL, "no temporary directory");
        }
        snprintf(conf, sizeof(conf), "%s/tandem.conf", dir);
        for (size_t i = 0; i < 4; i++)
                snprintf(paths[i], sizeof(paths[i]), "%s/lun%zu.img", dir, i);
        admin_dispatch_set_identity("fuzz");
        return 0;
}

/* The request with its file system effects kept in dir; NULL: dispatch the input as it is. */
static uint8_t *steer(const uint8_t *data, size_t size, size_t *out_len)
{
        Tandem__Admin__AdminRequest *q = tandem__admin__admin_request__unpack(NULL, size, data);
        if (!q)
                return NULL;
        bool changed = false;
        char *saved_path = NULL;
        if (q->op_case == TANDEM__ADMIN__ADMIN_REQUEST__OP_LUN_ADD && q->lun_add) {
                Tandem__Admin__LunAdd *m = q->lun_add;
                unsigned h = 0;
                for (const char *p = m->path ? m->path : ""; *p; p++)
                        h = h * 31u + (unsigned char)*p;
                saved_path = m->path;
                m->path = paths[h % 4];
                if (m->size > LUN_SIZE_MAX)
                        m->size %= LUN_SIZE_MAX;
                m->thin = true;
                m->direct = false;
                changed = true;
        } else if (q->op_case == TANDEM__ADMIN__ADMIN_REQUEST__OP_LUN_RESIZE && q->lun_resize) {
                if (q->lun_resize->size > RESIZE_SIZE_MAX)
                        q->lun_resize->size %= RESIZE_SIZE_MAX;
                changed = true;
        }
        uint8_t *out = NULL;
        if (changed) {
                *out_len = tandem__admin__admin_request__get_packed_size(q);
                out = malloc(*out_len ? *out_len : 1);
                FUZZ_ASSERT(out != NULL, "out of memory");
                tandem__admin__admin_request__pack(q, out);
        }
        if (saved_path)
                q->lun_add->path = saved_path; /* free_unpacked frees what unpack made */
        tandem__admin__admin_request__free_unpacked(q, NULL);
        return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        remove_files();
        registry_start();
        size_t len = size;
        uint8_t *steered = steer(data, size, &len);
        const uint8_t *req = steered ? steered : data;
        Tandem__Admin__AdminRequest *probe = tandem__admin__admin_request__unpack(NULL, len, req);
        bool decodes = probe != NULL;
        if (probe)
                tandem__admin__admin_request__free_unpacked(probe, NULL);

        uint8_t *out = NULL;
        size_t out_len = 0;
        int rc = admin_dispatch(req, len, &out, &out_len);
        FUZZ_ASSERT(rc == 0 || rc == -ENOMEM, "admin_dispatch = %d", rc);
        if (rc == 0) {
                Tandem__Admin__AdminResponse *r =
                    tandem__admin__admin_response__unpack(NULL, out_len, out);
                FUZZ_ASSERT(r != NULL, "the response does not decode");
                const char *error = r->error ? r->error : "";
                if (fuzz_verbose())
                        fprintf(stderr, "ok=%d errno=%d error=%s\n", r->ok, r->errno_value, error);
                if (r->ok) {
                        FUZZ_ASSERT(r->errno_value == 0 && !error[0],
                                    "ok with errno %d and error \"%s\"", r->errno_value, error);
                } else {
                        FUZZ_ASSERT(r->errno_value > 0, "refused with errno %d", r->errno_value);
                        /* The reason may quote the request's own bytes back to it. */
                        FUZZ_ASSERT(error[0], "refused without a reason");
                }
                if (!decodes)
                        FUZZ_ASSERT(!r->ok && r->errno_value == EPROTO,
                                    "undecodable request answered ok=%d errno %d", r->ok,
                                    r->errno_value);
                tandem__admin__admin_response__free_unpacked(r, NULL);
        }
        free(out);
        free(steered);
        if (access(conf, F_OK) == 0) {
                struct tdm_config c;
                char err[512] = "";
                FUZZ_ASSERT(tdm_config_load(conf, &c, err, sizeof(err)) == 0,
                            "the configuration the registry saved does not load: %s", err);
                tdm_config_free(&c);
        }
        tdm_registry_fini();
        return 0;
}
