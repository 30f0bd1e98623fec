/*
 * The configuration file under fuzzing: tdm_config_parse_string() on arbitrary text (the
 * libconfig parse, then tandem's field parsing and validation), and for every text it
 * accepts the round trip the admin plane relies on: tdm_config_save() writes it (in a
 * directory in /dev/shm), tdm_config_load() must read it back to the same configuration, and
 * saving what was loaded must write the same file again. A config tandemd accepts but
 * cannot save and reload would stop the daemon at its next start.
 *
 * Input: the text (a NUL is added; text after an embedded NUL is not seen by the parser).
 * Texts with "@include" are skipped: libconfig would open the named file, and which files
 * exist here is not part of the input (the config file is the admin's, not a peer's).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config_roundtrip.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
        (void)argc;
        (void)argv;
        conf_dir_init("fuzz-config");
        return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
        char *text = malloc(size + 1);
        FUZZ_ASSERT(text != NULL, "out of memory");
        memcpy(text, data, size);
        text[size] = '\0';
        if (strstr(text, "@include")) {
                free(text);
                return 0;
        }

        struct tdm_config a;
        char err[512] = "";
        int rc = tdm_config_parse_string(text, &a, err, sizeof(err));
        if (fuzz_verbose())
                fprintf(stderr, "parse = %d%s%s\n", rc, rc ? ": " : "", err);
        FUZZ_ASSERT(rc == 0 || rc == -EINVAL, "tdm_config_parse_string = %d: %s", rc, err);
        if (rc) {
                /* Documented: a refused text leaves cfg empty, and the message names why. */
                FUZZ_ASSERT(err[0] != '\0', "refused without a message");
                check_empty(&a, "a refused parse");
        } else {
                char verr[512] = "";
                FUZZ_ASSERT(tdm_config_validate(&a, verr, sizeof(verr)) == 0,
                            "accepted config fails validation: %s", verr);
                round_trip(&a);
        }
        tdm_config_free(&a);
        free(text);
        return 0;
}
