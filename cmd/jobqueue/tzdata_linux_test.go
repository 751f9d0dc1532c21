package main

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// systemZoneDirs are where Go's time.LoadLocation looks for zones on
// Linux after $ZONEINFO, before the copy a program embeds (time/tzdata);
// after that copy, it looks in $GOROOT/lib/time/zoneinfo.zip (GOROOT, when
// not in the environment, being the one the binary was built with).
var systemZoneDirs = []string{"/usr/share/zoneinfo", "/usr/share/lib/zoneinfo", "/usr/lib/locale/TZ", "/etc/zoneinfo"}

// TestZoneWithoutZoneinfo: a worker whose --periodic schedule names a time
// zone starts on a machine without zoneinfo, as a minimal container image:
// here ZONEINFO and GOROOT are an empty directory and, in a mount
// namespace of its own (unshare), the system's zone directories are empty
// too, so the zone can only come from the binary's embedded copy. Before, the binary did not
// embed time/tzdata and exited 2: unknown time zone "Europe/Berlin".
func TestZoneWithoutZoneinfo(t *testing.T) {
	t.Parallel()
	if err := exec.Command("unshare", "--map-root-user", "--mount", "true").Run(); err != nil {
		t.Skipf("needs unshare --map-root-user --mount (util-linux, user namespaces) to hide the system's zoneinfo: %v", err)
	}
	c := sqliteCLI(t)
	c.ok(t, "install")
	empty := t.TempDir()
	// $0 is the empty directory, mounted over each zone directory there
	// is; then Europe/Berlin must be nowhere on disk.
	hide := `for d in ` + strings.Join(systemZoneDirs, " ") + `; do
	if [ -d "$d" ]; then mount --bind "$0" "$d" || exit 97; fi
done
for d in ` + strings.Join(systemZoneDirs, " ") + `; do
	if [ -e "$d/Europe/Berlin" ]; then echo "$d/Europe/Berlin still there" >&2; exit 98; fi
done
exec "$@"`
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "unshare", "--map-root-user", "--mount", "sh", "-c", hide, empty,
		binary, "--db", c.db, "--table", c.table, "work", "--exec", "true",
		"--periodic", "nightly=CRON_TZ=Europe/Berlin 0 3 * * *", "--max-runtime", "1s")
	cmd.Env = append(cleanEnv(), "ZONEINFO="+empty, "GOROOT="+empty)
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("the worker did not stop within a minute; output:\n%s", out)
	}
	if err != nil {
		t.Fatalf("the worker with a Europe/Berlin schedule and no zoneinfo: %v; output:\n%s", err, out)
	}
	if !strings.Contains(string(out), "worker stopped") {
		t.Errorf("no \"worker stopped\" line; output:\n%s", out)
	}
}
