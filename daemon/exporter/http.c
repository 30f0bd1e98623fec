/*
 * The HTTP side of the exporter: libmicrohttpd with its own polling thread (epoll), bound to
 * metrics.listen only. It answers GET (and HEAD) /metrics; everything else gets 404 or 405.
 * libmicrohttpd parses requests and enforces the limits (tandem/exporter.h): connections,
 * memory for a request's headers (more: 431 and close), and an idle timeout (a slow client
 * is closed). None of it runs on the control thread or an iSCSI worker.
 */
#include <errno.h>
#include <microhttpd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "exporter_internal.h"
#include "tandem/config_values.h"
#include "tandem/exporter.h"
#include "tandem/log.h"
#include "tandem/openmetrics.h"

static struct MHD_Daemon *httpd;

static enum MHD_Result answer_text(struct MHD_Connection *c, unsigned status, const char *text)
{
        struct MHD_Response *r =
            MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
        if (!r)
                return MHD_NO;
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
        if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
                MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
        enum MHD_Result ret = MHD_queue_response(c, status, r);
        MHD_destroy_response(r);
        return ret;
}

static enum MHD_Result answer_metrics(struct MHD_Connection *c)
{
        struct scrape s = {0};
        s.openmetrics = tdm_metrics_wants_openmetrics(
            MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT));
        int rc = exporter_scrape(&s);
        if (rc < 0) {
                free(s.text);
                return answer_text(c, MHD_HTTP_SERVICE_UNAVAILABLE,
                                   rc == -ETIMEDOUT ? "tandemd is busy; try again\n"
                                                    : "metrics unavailable\n");
        }
        struct MHD_Response *r =
            MHD_create_response_from_buffer(s.len, s.text, MHD_RESPMEM_MUST_FREE);
        if (!r) {
                free(s.text);
                return MHD_NO;
        }
        MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE,
                                s.openmetrics ? TDM_METRICS_TYPE_OPENMETRICS
                                              : TDM_METRICS_TYPE_TEXT);
        enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
        MHD_destroy_response(r);
        return ret;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **req_cls)
{
        static int seen;
        (void)cls;
        (void)version;
        (void)upload_data;
        if (!*req_cls) { /* headers are in: answer once the body (if any) is read */
                *req_cls = &seen;
                return MHD_YES;
        }
        if (*upload_data_size) { /* a body nobody asked for: skip it */
                *upload_data_size = 0;
                return MHD_YES;
        }
        if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
                return answer_text(c, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET /metrics\n");
        if (strcmp(url, "/metrics") != 0)
                return answer_text(c, MHD_HTTP_NOT_FOUND, "not found; try /metrics\n");
        return answer_metrics(c);
}

int exporter_start(qb_loop_t *loop, const char *listen, char *err, size_t errlen)
{
        struct sockaddr_storage ss;
        unsigned sslen;
        if (tdm_parse_ip_port(listen, &ss, &sslen) < 0) {
                snprintf(err, errlen, "metrics.listen: \"%s\" is not IP:PORT or [IPV6]:PORT",
                         listen);
                return -EINVAL;
        }
        int rc = exporter_scrape_init(loop, err, errlen);
        if (rc < 0)
                return rc;
        unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD;
        if (ss.ss_family == AF_INET6)
                flags |= MHD_USE_IPv6;
        httpd = MHD_start_daemon(
            flags, 0, NULL, NULL, on_request, NULL, MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
            MHD_OPTION_CONNECTION_LIMIT, (unsigned)EXPORTER_MAX_CONNECTIONS,
            MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)EXPORTER_IDLE_TIMEOUT_S,
            MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)EXPORTER_REQUEST_MEMORY, MHD_OPTION_END);
        if (!httpd) {
                exporter_scrape_close();
                exporter_scrape_fini();
                snprintf(err, errlen,
                         "metrics.listen: cannot listen on %s (in use, or not an address of "
                         "this host)",
                         listen);
                return -EADDRNOTAVAIL;
        }
        log_notice("metrics: serving GET /metrics on %s", listen);
        return 0;
}

void exporter_stop(void)
{
        if (!httpd)
                return;
        exporter_scrape_close();
        MHD_stop_daemon(httpd);
        httpd = NULL;
        exporter_scrape_fini();
}
