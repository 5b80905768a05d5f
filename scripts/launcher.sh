#!/bin/sh
# The `ledger-indexer` command on PATH: `make install` / `make uninstall` (PREFIX, default ~/.local).
#
#   scripts/launcher.sh install BINDIR ENTRY   write BINDIR/ledger-indexer, a launcher that execs ENTRY
#                                              (the venv's entry point), and say whether BINDIR is on PATH
#   scripts/launcher.sh uninstall BINDIR       remove BINDIR/ledger-indexer if `install` wrote it
#
# A file of that name that this script did not write is never replaced or removed.
set -eu

MARK="# ledger-indexer launcher written by \`make install\`"

ours() {
    [ -f "$1" ] && grep -qF "$MARK" "$1"
}

# The path, single-quoted for sh.
quote() {
    printf "'%s'" "$(printf '%s' "$1" | sed "s/'/'\\\\''/g")"
}

install_launcher() {
    bindir=$1 entry=$2
    target="$bindir/ledger-indexer"
    if [ ! -x "$entry" ]; then
        echo "make install: $entry is missing: run \`make setup\` first" >&2
        exit 1
    fi
    if [ -e "$target" ] || [ -L "$target" ]; then
        if ! ours "$target"; then
            echo "make install: $target exists and was not written by \`make install\`: remove it, or choose" \
                 "another PREFIX (make install PREFIX=DIR installs DIR/bin/ledger-indexer)" >&2
            exit 1
        fi
    fi
    mkdir -p "$bindir"
    bindir=$(cd "$bindir" && pwd)  # absolute, without doubled or trailing slashes: as PATH names it
    target="$bindir/ledger-indexer"
    q=$(quote "$entry")
    tmp="$target.tmp.$$"
    cat > "$tmp" <<LAUNCHER
#!/bin/sh
$MARK (\`make uninstall\` removes it)
entry=$q
[ -x "\$entry" ] || { echo "ledger-indexer: \$entry is missing: run 'make setup' in its checkout, or 'make uninstall'" >&2; exit 127; }
exec "\$entry" "\$@"
LAUNCHER
    chmod 0755 "$tmp"
    mv -f "$tmp" "$target"
    echo "installed $target -> $entry"
    found=$(command -v ledger-indexer 2>/dev/null || true)
    case ":$PATH:" in
        *":$bindir:"*)
            if [ "$found" = "$target" ]; then
                echo "$bindir is on PATH: run \`ledger-indexer --help\`"
            else
                echo "$bindir is on PATH, but $found comes first: remove it, or put $bindir earlier in PATH"
            fi ;;
        *)
            echo "$bindir is not on PATH: add it (e.g. in ~/.profile, then log in again):"
            echo "    export PATH=\"$bindir:\$PATH\""
            echo "or run the command as $target" ;;
    esac
}

uninstall_launcher() {
    bindir=$1
    [ ! -d "$bindir" ] || bindir=$(cd "$bindir" && pwd)
    target="$bindir/ledger-indexer"
    if [ ! -e "$target" ] && [ ! -L "$target" ]; then
        echo "nothing to remove: $target does not exist"
        return 0
    fi
    if ! ours "$target"; then
        echo "make uninstall: $target was not written by \`make install\`: left in place" >&2
        exit 1
    fi
    rm -f "$target"
    echo "removed $target"
}

case "${1:-}" in
    install) [ $# -eq 3 ] || { echo "usage: $0 install BINDIR ENTRY" >&2; exit 2; }; install_launcher "$2" "$3" ;;
    uninstall) [ $# -eq 2 ] || { echo "usage: $0 uninstall BINDIR" >&2; exit 2; }; uninstall_launcher "$2" ;;
    *) echo "usage: $0 install BINDIR ENTRY | uninstall BINDIR" >&2; exit 2 ;;
esac
