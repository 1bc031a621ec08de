# Containers for the shell tests, as podman runs them on this machine and
# on CI's: podman 4.3 from Debian (scripts/test-deps.sh installs it), as
# root, with
#   --runtime runc                 Debian's runc, named: crun may be there too
#   --ulimit nofile=4096:4096      podman's default (1048576) is above this
#   --ulimit nproc=1024:1024       VM's hard limits, which runc then fails to set
#   --network none                 no network stack to set up (nor to leave behind)
#   --rootfs /:O                   the host's root as the image, under an overlay
#                                  that is thrown away: no image from a registry
# The overlay shows the root file system alone, not what is mounted on it
# (the tests' private /tmp): a test mounts what the container must share
# (-v DIR:DIR). Sourced after lib.sh.
#
#   need_podman             skips the test (exit 77, with why) unless podman
#                           can start a container here (podman or runc not
#                           installed: lib.sh's missing, a failure under CI=true)
#   in_private_cdi DIR "$0" "$@"
#                           runs the test again in a mount namespace of its own
#                           where /etc/cdi shows only DIR and /run/cdi nothing:
#                           podman 4.3 reads CDI specs from those two folders
#                           alone (containers.conf's cdi_spec_dirs came in
#                           podman 4.4), and a test must not write there
#   in_private_cdi_tmp NAME "$0" "$@"
#                           the same, with a folder of the run's own as $tmp
#                           (vram-NAME.XXXXXX, kept across the re-run), whose
#                           cdi/ is the private /etc/cdi
#   container_run NAME OPTION... -- COMMAND...
#                           starts a detached container named $containers_prefix-NAME
#                           (the test's pid in it: no name shared with a test
#                           run beside it); the root is always the host's
#   remove_containers       removes every container the test started (at exit)
containers_prefix=vt$$
podman_flags=(--runtime runc --ulimit nofile=4096:4096 --ulimit nproc=1024:1024 --network none)
_containers=()

container_skip() {
  echo "SKIP: $*"
  exit 77
}

need_podman() {
  [ "$(id -u)" = 0 ] || container_skip "the container tests run podman as root (rootless podman needs subordinate ids set up)"
  command -v podman >/dev/null || missing "podman is not installed (scripts/test-deps.sh installs Debian's)"
  command -v runc >/dev/null || missing "runc is not installed (scripts/test-deps.sh installs Debian's)"
  local out
  if ! out=$(podman run --rm "${podman_flags[@]}" --rootfs /:O true 2>&1); then
    container_skip "podman cannot start a container here: $(echo "$out" | tail -1)"
  fi
}

in_private_cdi() {
  local dir=$1; shift
  if [ -z "${VRAMTEST_PRIVATE_CDI:-}" ]; then
    VRAMTEST_PRIVATE_CDI=$dir exec unshare -m --propagation private "$@"
    container_skip "unshare -m cannot make a mount namespace here"
  fi
  # /etc/cdi may not exist: an overlay on /etc (thrown away with the
  # namespace) lets it be made without touching the host's /etc.
  if [ ! -d /etc/cdi ]; then
    mkdir -p "$dir.etc/up" "$dir.etc/work" &&
      mount -t overlay vram-test-etc -o "lowerdir=/etc,upperdir=$dir.etc/up,workdir=$dir.etc/work" /etc &&
      mkdir /etc/cdi || container_skip "cannot make a private /etc/cdi (an overlay on /etc)"
  fi
  mount --bind "$dir" /etc/cdi || container_skip "cannot mount $dir on /etc/cdi"
  if [ -d /run/cdi ]; then
    mount -t tmpfs -o mode=755 vram-test-cdi /run/cdi || container_skip "cannot hide /run/cdi"
  fi
}

container_run() {
  local name=$containers_prefix-$1; shift
  _containers+=("$name")
  local opts=()
  while [ $# -gt 0 ] && [ "$1" != -- ]; do opts+=("$1"); shift; done
  shift
  podman run -d --name "$name" "${podman_flags[@]}" "${opts[@]}" --rootfs /:O "$@" >/dev/null
}

remove_containers() {
  local c
  for c in "${_containers[@]}"; do podman rm -f -t 0 "$c" >/dev/null 2>&1; done
  _containers=()
}

in_private_cdi_tmp() {
  local name=$1; shift
  if [ -z "${VRAMTEST_PRIVATE_CDI:-}" ]; then
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/vram-$name.XXXXXX")
    chmod 755 "$tmp"
    mkdir "$tmp/cdi"
    export VRAMTEST_TMP=$tmp
    in_private_cdi "$tmp/cdi" "$@"
  fi
  tmp=$VRAMTEST_TMP
  in_private_cdi "$tmp/cdi"
}
