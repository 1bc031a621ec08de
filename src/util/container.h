/* container: what vram oci-hook and vramd agree a container is named by:
 * its id, as runtimes give it, and the cgroup a runtime makes for it,
 * whose last part names the id. Both sides check the same way, so that a
 * registration the hook would refuse is refused by vramd too. */
#ifndef VRAM_CONTAINER_H
#define VRAM_CONTAINER_H

#include <stdbool.h>

#define CONTAINER_ID_MAX 255

/* An id as OCI runtimes take it: 1 to 255 of A-Z a-z 0-9 _ . + -, not "."
 * or "..". */
bool container_id_ok(const char *id);
/* Whether a cgroup's last component names container `id`, as runtimes
 * name them: ID, PREFIX-ID, PREFIX-ID.scope (podman's libpod-ID, Docker's
 * docker-ID.scope, containerd's cri-containerd-ID.scope, CRI-O's
 * crio-ID). */
bool container_cgroup_names(const char *cgroup, const char *id);

#endif
