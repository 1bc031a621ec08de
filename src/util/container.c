/* container: a container's id and its cgroup's name (container.h). */
#include "container.h"

#include <ctype.h>
#include <string.h>

bool container_id_ok(const char *id)
{
    size_t n = strlen(id);
    if (n == 0 || n > CONTAINER_ID_MAX)
        return false;
    for (const char *p = id; *p; p++)
        if (!isalnum((unsigned char)*p) && !strchr("_.+-", *p))
            return false;
    return strcmp(id, ".") && strcmp(id, "..");
}

bool container_cgroup_names(const char *cgroup, const char *id)
{
    const char *last = strrchr(cgroup, '/');
    last = last ? last + 1 : cgroup;
    size_t n = strlen(last), idn = strlen(id);
    if (idn == 0)
        return false;
    if (n >= 6 && strcmp(last + n - 6, ".scope") == 0)
        n -= 6;
    if (n < idn || memcmp(last + n - idn, id, idn) != 0)
        return false;
    return n == idn || last[n - idn - 1] == '-';
}
