/* The table of operations as tandemctl sees it: parsing, checks and printers, no handlers. */
#include <string.h>

#include "ctl_internal.h"

#define ADMIN_CLI(x)    x
#define ADMIN_DAEMON(x) NULL
#include "tandem/admin_ops_table.h"

#define N_OPS (sizeof(admin_op_table) / sizeof(admin_op_table[0]))

const struct admin_op *admin_ops(size_t *n)
{
        *n = N_OPS;
        return admin_op_table;
}

const struct admin_op *admin_command(const char *cmd)
{
        for (size_t i = 0; i < N_OPS; i++)
                if (strcmp(admin_op_table[i].cmd, cmd) == 0)
                        return &admin_op_table[i];
        return NULL;
}

const struct admin_op *admin_op_find(const char *cmd, const char *sub)
{
        for (size_t i = 0; i < N_OPS; i++) {
                const struct admin_op *op = &admin_op_table[i];
                if (strcmp(op->cmd, cmd) == 0 && op->sub && strcmp(op->sub, sub) == 0)
                        return op;
        }
        return NULL;
}
