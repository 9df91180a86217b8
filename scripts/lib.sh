# Shared by the scripts in this folder (source it).

# ensure_commands CMD:PACKAGE ...: install, from Debian, the package of each
# command that is not on PATH (as root, or through sudo).
ensure_commands() {
    local missing=() pair
    for pair in "$@"; do
        command -v "${pair%%:*}" >/dev/null || missing+=("${pair#*:}")
    done
    ((${#missing[@]})) || return 0
    echo "==> installing ${missing[*]}"
    local sudo_cmd=()
    [ "$(id -u)" = 0 ] || sudo_cmd=(sudo)
    "${sudo_cmd[@]}" apt-get update -qq
    DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq "${missing[@]}"
}
