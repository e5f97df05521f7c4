// SPDX-License-Identifier: Apache-2.0

// Package pgcluster runs throwaway PostgreSQL clusters for the demo, local
// development and tests: initdb into a private directory, a server listening
// only on a unix socket in that directory, and nothing left behind
// afterwards. It links no testing code: the helpers that take a testing.TB
// are store/pgtest's.
//
// The server binaries come from the PostgreSQL packages of the operating
// system (Debian: apt-get install postgresql); the newest
// /usr/lib/postgresql/*/bin is used, or the directory named by the
// environment variable PGTEST_BIN. PostgreSQL refuses to run as root, so a
// root process runs initdb and pg_ctl as the postgres user the package
// creates.
//
// StartCluster starts one; Cluster.Kill crashes it, as a power cut would.
package pgcluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/errorownership/errorownership/internal/portlock"
)

// InstallHint tells what to do when the server binaries are missing.
const InstallHint = "install the PostgreSQL server binaries: apt-get install postgresql (or set PGTEST_BIN to a directory holding initdb and pg_ctl)"

// ErrNotInstalled is returned when no PostgreSQL server binaries are found.
var ErrNotInstalled = errors.New("pgcluster: PostgreSQL server binaries not found under /usr/lib/postgresql/*/bin; " + InstallHint)

// binGlob is where Debian and Ubuntu install the server binaries, one
// directory per major version.
const binGlob = "/usr/lib/postgresql/*/bin"

// maxSocketPath is the longest unix socket path Linux accepts (sun_path
// holds 108 bytes including the terminating NUL).
const maxSocketPath = 107

// Options configure StartCluster.
type Options struct {
	// Dir holds the cluster: the data directory (Dir/data), the server log
	// (Dir/postgres.log) and the socket. Empty: a new temporary directory,
	// removed by Remove. An existing Dir/data is started, not initialised.
	Dir string
	// Port numbers the socket (.s.PGSQL.<port>). The socket lives in a
	// private directory, so any port is free: 0 means 5432. With
	// ListenAddresses set, 0 means a free TCP port.
	Port int
	// ListenAddresses, if not empty, also listens on TCP (such as
	// "127.0.0.1"). By default the server has no TCP socket at all.
	ListenAddresses string
	// PasswordAuth makes TCP connections authenticate with a password
	// (scram-sha-256), as a production server's do, so that a wrong one is
	// refused; the unix socket still trusts the postgres user. By default
	// every connection is trusted.
	PasswordAuth bool
}

// Cluster is one PostgreSQL cluster. Its methods are not safe for
// concurrent use.
type Cluster struct {
	dir     string
	port    int
	bin     string
	cred    *syscall.Credential
	temp    bool
	running bool
	// reserved holds port, chosen by StartCluster, against other
	// processes' servers while the cluster exists, stopped or not: it
	// restarts on the same port.
	reserved *portlock.Port
}

// FindBinaries returns the directory of the newest PostgreSQL server
// binaries, or ErrNotInstalled.
func FindBinaries() (string, error) {
	if dir := os.Getenv("PGTEST_BIN"); dir != "" {
		if _, err := os.Stat(filepath.Join(dir, "pg_ctl")); err != nil { //nolint:gosec // G703: PGTEST_BIN is the developer's own setting, and only stat'ed
			return "", fmt.Errorf("pgcluster: PGTEST_BIN=%s: %w; %s", dir, err, InstallHint)
		}
		return dir, nil
	}
	dirs, _ := filepath.Glob(binGlob)
	// Sort by major version numerically: "9.6" < "15" < "16".
	slices.SortFunc(dirs, func(a, b string) int { return versionOf(a) - versionOf(b) })
	for i := len(dirs) - 1; i >= 0; i-- {
		if isExecutable(filepath.Join(dirs[i], "initdb")) && isExecutable(filepath.Join(dirs[i], "pg_ctl")) {
			return dirs[i], nil
		}
	}
	return "", ErrNotInstalled
}

// versionOf reads the major version from /usr/lib/postgresql/<v>/bin as
// major*100+minor, so old "9.6" style versions sort below "10".
func versionOf(binDir string) int {
	v := filepath.Base(filepath.Dir(binDir))
	major, minor, _ := strings.Cut(v, ".")
	m, _ := strconv.Atoi(major)
	n, _ := strconv.Atoi(minor)
	return m*100 + n
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// StartCluster initialises (if needed) and starts a cluster.
func StartCluster(ctx context.Context, opts Options) (*Cluster, error) {
	bin, err := FindBinaries()
	if err != nil {
		return nil, err
	}
	c := &Cluster{bin: bin, port: opts.Port}
	if c.cred, err = ServerCredential(); err != nil {
		return nil, err
	}
	if opts.Dir == "" {
		sweepStale()
		if c.dir, err = os.MkdirTemp("", "pgcluster-"); err != nil {
			return nil, fmt.Errorf("pgcluster: %w", err)
		}
		c.temp = true
		// Remember who owns the cluster, so a later run can stop and
		// remove it should this process die without cleaning up.
		if err := os.WriteFile(filepath.Join(c.dir, ownerFile), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
			return nil, fmt.Errorf("pgcluster: %w", errors.Join(err, c.Remove()))
		}
	} else {
		if c.dir, err = filepath.Abs(opts.Dir); err != nil {
			return nil, fmt.Errorf("pgcluster: %w", err)
		}
		if err := os.MkdirAll(c.dir, 0o700); err != nil {
			return nil, fmt.Errorf("pgcluster: %w", err)
		}
	}
	fail := func(err error) (*Cluster, error) {
		if c.temp {
			err = errors.Join(err, c.Remove())
		}
		c.releasePort()
		return nil, err
	}
	if c.port == 0 {
		c.port = 5432
		if opts.ListenAddresses != "" {
			if c.reserved, err = portlock.Reserve(); err != nil {
				return fail(fmt.Errorf("pgcluster: %w", err))
			}
			c.port = c.reserved.Number()
		}
	}
	if sock := c.socketPath(); len(sock) > maxSocketPath {
		return fail(fmt.Errorf("pgcluster: socket path %s is longer than %d bytes; use a shorter directory", sock, maxSocketPath))
	}
	if err := c.Chown(c.dir); err != nil {
		return fail(err)
	}
	if _, err := os.Stat(filepath.Join(c.dataDir(), "PG_VERSION")); err != nil {
		if err := c.initdb(ctx, opts.ListenAddresses, opts.PasswordAuth); err != nil {
			return fail(err)
		}
	}
	if err := c.Start(ctx); err != nil {
		return fail(err)
	}
	return c, nil
}

// Existing returns the cluster StartCluster made in dir, running or not,
// without starting it: to stop a persistent cluster, or print its DSN.
func Existing(dir string) (*Cluster, error) {
	bin, err := FindBinaries()
	if err != nil {
		return nil, err
	}
	cred, err := ServerCredential()
	if err != nil {
		return nil, err
	}
	if dir, err = filepath.Abs(dir); err != nil {
		return nil, fmt.Errorf("pgcluster: %w", err)
	}
	c := &Cluster{dir: dir, bin: bin, cred: cred, port: 5432}
	if _, err := os.Stat(filepath.Join(c.dataDir(), "PG_VERSION")); err != nil {
		return nil, fmt.Errorf("pgcluster: no cluster in %s: %w", dir, err)
	}
	// postmaster.pid's fourth line is the port; the file outlives a crash,
	// so ask pg_ctl whether the server runs.
	if b, err := os.ReadFile(filepath.Join(c.dataDir(), "postmaster.pid")); err == nil {
		if lines := strings.Split(string(b), "\n"); len(lines) > 3 {
			if p, err := strconv.Atoi(strings.TrimSpace(lines[3])); err == nil {
				c.port = p
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c.running = c.run(ctx, "pg_ctl", "status", "-D", c.dataDir()) == nil
	return c, nil
}

// ServerCredential returns the identity to run the server as: nil to run as
// ourselves, the postgres user when we are root (initdb refuses root).
func ServerCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("pgcluster: running as root needs a postgres user to run the server as (%w); %s", err, InstallHint)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("pgcluster: user postgres: %w", err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

// Chown gives path to the server's user, when that is not us: a directory
// for a tablespace, say.
func (c *Cluster) Chown(path string) error {
	if c.cred == nil {
		return nil
	}
	if err := os.Chown(path, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	return nil
}

func (c *Cluster) dataDir() string    { return filepath.Join(c.dir, "data") }
func (c *Cluster) logFile() string    { return filepath.Join(c.dir, "postgres.log") }
func (c *Cluster) socketPath() string { return filepath.Join(c.dir, ".s.PGSQL."+strconv.Itoa(c.port)) }

// initdb creates the data directory and configures the server for tests:
// only the private socket (plus TCP if asked), and no durability, which
// throwaway data does not need and which costs most of the time.
func (c *Cluster) initdb(ctx context.Context, listen string, passwords bool) error {
	auth := []string{"-A", "trust"}
	if passwords {
		auth = []string{"--auth-local=trust", "--auth-host=scram-sha-256"}
	}
	args := append([]string{"-D", c.dataDir(), "-U", "postgres"}, auth...)
	if err := c.run(ctx, "initdb", append(args, "-E", "UTF8", "--locale=C", "--no-sync", "--no-instructions")...); err != nil {
		return err
	}
	conf := fmt.Sprintf(`
# pgcluster: a throwaway cluster
listen_addresses = '%s'
port = %d
unix_socket_directories = '%s'
unix_socket_permissions = 0700
fsync = off
synchronous_commit = off
full_page_writes = off
timezone = 'UTC'
log_timezone = 'UTC'
max_connections = 200
`, listen, c.port, strings.ReplaceAll(c.dir, "'", "''"))
	f, err := os.OpenFile(filepath.Join(c.dataDir(), "postgresql.conf"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	_, err = f.WriteString(conf)
	if err2 := f.Close(); err == nil {
		err = err2
	}
	if err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	return nil
}

// run runs one of the server's programs as the server's user.
func (c *Cluster) run(ctx context.Context, prog string, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(c.bin, prog), args...) //nolint:gosec // G204: a PostgreSQL program of the binaries found, with arguments this package builds
	// The server's user may not be able to read our working directory.
	cmd.Dir = c.dir
	cmd.Env = serverEnv()
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	// pg_ctl start leaves the server running with our output pipes; do not
	// wait for them to close.
	cmd.WaitDelay = time.Second
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("pgcluster: %s %s: %w\n%s", prog, strings.Join(args, " "), err, strings.TrimSpace(out.String()))
	}
	return nil
}

// serverEnv is our environment without PG* variables (PGDATA, PGPORT …),
// which would otherwise redirect the server's programs.
func serverEnv() []string {
	env := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "PG") })
	return append(env, "LC_ALL=C")
}

// Start starts the stopped cluster and waits until it accepts connections.
func (c *Cluster) Start(ctx context.Context) error {
	if c.running {
		return nil
	}
	// The server's output goes to the log file, not to our pipes, so pg_ctl
	// returns as soon as the server is ready.
	if err := c.run(ctx, "pg_ctl", "start", "-D", c.dataDir(), "-l", c.logFile(), "-w", "-t", "60", "-s"); err != nil {
		return fmt.Errorf("%w\nserver log:\n%s", err, c.logTail())
	}
	c.running = true
	return nil
}

// Stop stops the cluster (fast shutdown: sessions are disconnected).
func (c *Cluster) Stop(ctx context.Context) error {
	if !c.running {
		return nil
	}
	if err := c.run(ctx, "pg_ctl", "stop", "-D", c.dataDir(), "-m", "fast", "-w", "-t", "60", "-s"); err != nil {
		return err
	}
	c.running = false
	return nil
}

// Restart stops the cluster if it runs and starts it again on the same data
// directory and socket.
func (c *Cluster) Restart(ctx context.Context) error {
	if err := c.Stop(ctx); err != nil {
		return err
	}
	return c.Start(ctx)
}

// Running reports whether the cluster was started and not stopped.
func (c *Cluster) Running() bool { return c.running }

// Remove stops the cluster and, if StartCluster created its directory,
// removes it.
func (c *Cluster) Remove() error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := c.Stop(ctx)
	if err != nil {
		// Do not leave a server running on a directory we are about to delete.
		err = errors.Join(err, c.run(ctx, "pg_ctl", "stop", "-D", c.dataDir(), "-m", "immediate", "-w", "-s"))
	}
	if c.temp {
		err = errors.Join(err, os.RemoveAll(c.dir))
	}
	if err == nil {
		// A server that may still run keeps its port from the others.
		c.releasePort()
	}
	return err
}

func (c *Cluster) releasePort() {
	if c.reserved != nil {
		c.reserved.Release()
		c.reserved = nil
	}
}

// Dir returns the cluster's directory, which also holds its socket.
func (c *Cluster) Dir() string { return c.dir }

// Port returns the socket's (and any TCP listener's) port.
func (c *Cluster) Port() int { return c.port }

// DSN returns the connection string of the postgres database.
func (c *Cluster) DSN() string { return c.DSNFor("postgres") }

// DSNFor returns the connection string of the named database. The cluster
// trusts local connections: no password is needed or given.
func (c *Cluster) DSNFor(dbname string) string {
	return fmt.Sprintf("host=%s port=%d user=postgres dbname=%s sslmode=disable", quoteDSN(c.dir), c.port, quoteDSN(dbname))
}

// quoteDSN quotes a keyword/value connection string value when it needs it.
func quoteDSN(v string) string {
	if v != "" && !strings.ContainsAny(v, ` '\`) {
		return v
	}
	return "'" + strings.NewReplacer(`\`, `\\`, `'`, `\'`).Replace(v) + "'"
}

// logTail returns the end of the server log, for error messages.
func (c *Cluster) logTail() string {
	b, err := os.ReadFile(c.logFile())
	if err != nil {
		return "(no server log: " + err.Error() + ")"
	}
	const keep = 4 << 10
	if len(b) > keep {
		b = b[len(b)-keep:]
	}
	return string(b)
}

// ownerFile, in a temporary cluster's directory, holds the PID of the
// process that created it.
const ownerFile = "owner.pid"

// sweepStale stops and removes temporary clusters whose creating process is
// gone: a test binary that panicked or was killed cannot clean up after
// itself, and its server would otherwise run forever.
func sweepStale() {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), "pgcluster-*"))
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, ownerFile)) //nolint:gosec // G304: the owner file of one of our own pgcluster-* directories
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 || syscall.Kill(pid, 0) != syscall.ESRCH {
			continue
		}
		bin, err := FindBinaries()
		if err != nil {
			return
		}
		cred, err := ServerCredential()
		if err != nil {
			return
		}
		c := &Cluster{dir: dir, bin: bin, cred: cred, temp: true, running: true}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		if _, err := os.Stat(filepath.Join(c.dataDir(), "postmaster.pid")); err == nil {
			_ = c.run(ctx, "pg_ctl", "stop", "-D", c.dataDir(), "-m", "immediate", "-w", "-s")
		}
		cancel()
		_ = os.RemoveAll(dir)
	}
}

// CreateDatabase creates an empty database and returns its connection string.
func (c *Cluster) CreateDatabase(ctx context.Context, name string) (string, error) {
	if err := c.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", err
	}
	return c.DSNFor(name), nil
}

// Exec runs one statement in the postgres database, such as CREATE DATABASE.
func (c *Cluster) Exec(ctx context.Context, sql string) error {
	conn, err := pgx.Connect(ctx, c.DSN())
	if err != nil {
		return fmt.Errorf("pgcluster: %w", err)
	}
	_, err = conn.Exec(ctx, sql)
	err = errors.Join(err, conn.Close(ctx))
	if err != nil {
		return fmt.Errorf("pgcluster: %s: %w", sql, err)
	}
	return nil
}
