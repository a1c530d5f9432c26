// Package apachezk launches real Apache ZooKeeper 3.8 servers from Debian's zookeeper package:
// the reference implementation that zkd's oracle tests and benchmarks compare against.
//
// A server runs the way upstream's zkServer.sh runs it (the main class QuorumPeerMain on
// zookeeper.jar, upstream's -Xmx1000m), configured as a stock install: tickTime 2000, initLimit
// 10, syncLimit 5, forceSync=yes (an fsync on every write), every four-letter word allowed, the
// admin server off (admin.enableServer=true in ServerConfig.Extra turns it on, with the servlet
// API on the classpath) and no limit on connections from one address. Every file lives under the
// node directory the caller chooses:
//
//	conf/zoo.cfg, conf/log4j.properties   written by Launch
//	data/                                  dataDir (snapshots, myid)
//	txnlog/                                dataLogDir (the transaction log)
//	logs/zookeeper.log                     the server's log (log4j)
//	logs/zookeeper.out                     the JVM's stdout and stderr
//
// Each server is a JVM in its own session and process group, started by this process and
// reaped by its Process. Only that process is ever signalled, by its PID, never by name.
//
// This is test and tool machinery: tests, cmd/zkbench and other internal packages use it;
// production server code never does (internal/lint checks).
package apachezk

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// The Debian package's files.
const (
	// Jar is the ZooKeeper server jar of Debian's zookeeper package (libzookeeper-java).
	Jar = "/usr/share/java/zookeeper.jar"

	mainClass = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
	// The log4j 1.2 binding the server logs through (Debian's libslf4j-java, liblog4j1.2-java).
	slf4jLog4jJar = "/usr/share/java/slf4j-log4j12.jar"
	log4jJar      = "/usr/share/java/log4j-1.2.jar"
	// installHint says how to get what Installed looks for.
	installHint = "apt-get install zookeeper"
)

// NettyTLSJars returns the Netty jars that TLS needs and the server jar's manifest leaves out
// (Debian's libnetty-java, which zookeeper depends on): without them NettyServerCnxnFactory
// cannot start a TLS handshake (NoClassDefFoundError: io/netty/handler/codec/ByteToMessageDecoder),
// nor can the Java client's ClientCnxnSocketNetty connect. Java clients need them on their
// classpath too.
func NettyTLSJars() []string {
	return []string{"/usr/share/java/netty-codec.jar", "/usr/share/java/netty-resolver.jar"}
}

// jars returns the server's classpath after conf/ (where log4j finds log4j.properties): the
// server jar (its manifest names the rest of its dependencies), the Netty jars TLS needs and the
// log4j 1.2 binding.
func jars() []string {
	return append([]string{Jar, slf4jLog4jJar, log4jJar}, NettyTLSJars()...)
}

// servletJar is the servlet API (Debian's libservlet-api-java). The server jar's manifest names
// Jetty but not the servlet API Jetty needs, so without it on the classpath the AdminServer does
// not start ("Unable to load jetty").
const servletJar = "/usr/share/java/servlet-api.jar"

// AdminServerInstalled returns nil when a server launched with admin.enableServer=true in
// ServerConfig.Extra can start its AdminServer here, else an error saying what is missing.
func AdminServerInstalled() error {
	if err := Installed(); err != nil {
		return err
	}
	if _, err := os.Stat(servletJar); err != nil {
		return fmt.Errorf("apachezk: the AdminServer needs %s (apt-get install libservlet-api-java): %w", servletJar, err)
	}
	return nil
}

// adminEnabled reports whether the config turns the AdminServer on.
func (c *ServerConfig) adminEnabled() bool {
	return strings.EqualFold(c.Extra["admin.enableServer"], "true")
}

// DefaultHeapMB is the server's -Xmx in MiB when ServerConfig.HeapMB is zero: upstream
// zkEnv.sh's default. Debian's scripts set none (the JVM would take a quarter of RAM).
const DefaultHeapMB = 1000

// Installed returns nil when Debian's zookeeper package and a java binary are present, else an
// error saying what is missing and how to install it.
func Installed() error {
	var missing []string
	for _, jar := range jars() {
		if _, err := os.Stat(jar); err != nil {
			missing = append(missing, jar)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("apachezk: Apache ZooKeeper is not installed (%s missing); install Debian's package: %s",
			strings.Join(missing, ", "), installHint)
	}
	if _, err := javaPath(); err != nil {
		return fmt.Errorf("apachezk: no java binary on PATH (%s pulls in a JRE): %w", installHint, err)
	}
	return nil
}

// javaPath finds the java binary as an absolute path, so it survives a Wrap prefix.
func javaPath() (string, error) {
	p, err := exec.LookPath("java")
	if err != nil {
		return "", err
	}
	return filepath.Abs(p)
}

// ServerConfig describes one ZooKeeper server.
type ServerConfig struct {
	// Dir is the node directory; Launch creates conf/, data/, txnlog/ and logs/ in it. A
	// relative path is made absolute.
	Dir string
	// ClientAddr is the host:port clients connect to (zoo.cfg's clientPortAddress and
	// clientPort).
	ClientAddr string
	// ID is the server's myid; zero for a standalone server. An ensemble member needs one.
	ID int
	// Servers are the ensemble's full "server.N=host:peerPort:electionPort" lines; empty for a
	// standalone server.
	Servers []string
	// Extra holds more zoo.cfg keys (for example extendedTypesEnabled=true), written after the
	// defaults in key order. A key that is also a default replaces the default's value.
	Extra map[string]string
	// Wrap is a command prefix the JVM is started under, for example
	// {"ip", "netns", "exec", "ns1"}. It must exec the JVM in place (as `ip netns exec` does),
	// so that the PID started is the JVM's.
	Wrap []string
	// HeapMB is the JVM's -Xmx in MiB; zero means DefaultHeapMB.
	HeapMB int
	// JVMFlags are more JVM options, placed before the class path: system properties ZooKeeper
	// reads only from the JVM, such as -Djava.security.auth.login.config=FILE (the JAAS file for
	// SASL) or -Dzookeeper.superUser=NAME. Nil means none.
	JVMFlags []string
}

// standalone reports whether the server runs alone (no ensemble lines).
func (c *ServerConfig) standalone() bool { return len(c.Servers) == 0 }

// validate checks the config and returns it with an absolute Dir.
func (c ServerConfig) validate() (ServerConfig, error) {
	if c.Dir == "" {
		return c, errors.New("apachezk: ServerConfig.Dir is empty")
	}
	dir, err := filepath.Abs(c.Dir)
	if err != nil {
		return c, fmt.Errorf("apachezk: %w", err)
	}
	c.Dir = dir
	host, port, err := net.SplitHostPort(c.ClientAddr)
	if err != nil || host == "" {
		return c, fmt.Errorf("apachezk: ClientAddr %q is not host:port", c.ClientAddr)
	}
	if n, err := strconv.Atoi(port); err != nil || n <= 0 || n > 65535 {
		return c, fmt.Errorf("apachezk: ClientAddr %q has no valid port", c.ClientAddr)
	}
	if c.ID < 0 || (!c.standalone() && c.ID == 0) {
		return c, fmt.Errorf("apachezk: ID %d: an ensemble member needs an ID of at least 1", c.ID)
	}
	for _, s := range c.Servers {
		if !strings.HasPrefix(s, "server.") || !strings.Contains(s, "=") || strings.ContainsAny(s, "\n\r") {
			return c, fmt.Errorf("apachezk: %q is not a server.N=host:peerPort:electionPort line", s)
		}
	}
	for k, v := range c.Extra {
		if k == "" || strings.ContainsAny(k, "=\n\r") || strings.ContainsAny(v, "\n\r") {
			return c, fmt.Errorf("apachezk: bad zoo.cfg entry %q=%q", k, v)
		}
	}
	for _, f := range c.JVMFlags {
		if !strings.HasPrefix(f, "-") {
			return c, fmt.Errorf("apachezk: JVM flag %q does not start with '-'", f)
		}
	}
	if c.HeapMB < 0 {
		return c, fmt.Errorf("apachezk: HeapMB %d is negative", c.HeapMB)
	}
	if c.HeapMB == 0 {
		c.HeapMB = DefaultHeapMB
	}
	return c, nil
}

// zooCfg renders conf/zoo.cfg.
func (c *ServerConfig) zooCfg() string {
	host, port, _ := net.SplitHostPort(c.ClientAddr)
	kv := [][2]string{
		{"tickTime", "2000"},
		{"initLimit", "10"},
		{"syncLimit", "5"},
		{"dataDir", filepath.Join(c.Dir, "data")},
		{"dataLogDir", filepath.Join(c.Dir, "txnlog")},
		{"clientPortAddress", host},
		{"clientPort", port},
		// Benchmarks open more than the default 60 connections from one address.
		{"maxClientCnxns", "0"},
		{"admin.enableServer", "false"},
		{"4lw.commands.whitelist", "*"},
		{"forceSync", "yes"},
	}
	extra := make(map[string]string, len(c.Extra))
	for k, v := range c.Extra {
		extra[k] = v
	}
	for i := range kv {
		if v, ok := extra[kv[i][0]]; ok {
			kv[i][1] = v
			delete(extra, kv[i][0])
		}
	}
	var b strings.Builder
	for _, e := range kv {
		fmt.Fprintf(&b, "%s=%s\n", e[0], e[1])
	}
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "%s=%s\n", k, extra[k])
	}
	for _, s := range c.Servers {
		b.WriteString(s + "\n")
	}
	return b.String()
}

// log4jProperties sends the server's log to logs/zookeeper.log, rolled at 10 MB.
const log4jProperties = `log4j.rootLogger=INFO, FILE
log4j.appender.FILE=org.apache.log4j.RollingFileAppender
log4j.appender.FILE.File=${zookeeper.log.dir}/zookeeper.log
log4j.appender.FILE.MaxFileSize=10MB
log4j.appender.FILE.MaxBackupIndex=3
log4j.appender.FILE.layout=org.apache.log4j.PatternLayout
log4j.appender.FILE.layout.ConversionPattern=%d{ISO8601} %-5p [%t:%C{1}@%L] - %m%n
`

// writeFiles creates the node directory's layout and writes its configuration.
func (c *ServerConfig) writeFiles() error {
	for _, sub := range []string{"conf", "data", "txnlog", "logs"} {
		if err := os.MkdirAll(filepath.Join(c.Dir, sub), 0o755); err != nil {
			return fmt.Errorf("apachezk: %w", err)
		}
	}
	files := map[string]string{
		filepath.Join(c.Dir, "conf", "zoo.cfg"):          c.zooCfg(),
		filepath.Join(c.Dir, "conf", "log4j.properties"): log4jProperties,
	}
	if c.ID > 0 {
		files[filepath.Join(c.Dir, "data", "myid")] = strconv.Itoa(c.ID) + "\n"
	}
	for name, content := range files {
		if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
			return fmt.Errorf("apachezk: %w", err)
		}
	}
	return nil
}

// command returns the server's command line, Wrap prefix included.
func (c *ServerConfig) command(java string) []string {
	logs := filepath.Join(c.Dir, "logs")
	args := slices.Clone(c.Wrap)
	args = append(args, java,
		"-Dzookeeper.log.dir="+logs, "-Dzookeeper.log.file=zookeeper.log",
		fmt.Sprintf("-Xmx%dm", c.HeapMB),
		"-XX:+HeapDumpOnOutOfMemoryError", "-XX:HeapDumpPath="+logs, "-XX:OnOutOfMemoryError=kill -9 %p")
	args = append(args, c.JVMFlags...)
	return append(args, "-cp", strings.Join(c.classpath(), ":"),
		mainClass, filepath.Join(c.Dir, "conf", "zoo.cfg"))
}

// classpath is conf/, the jars, and the servlet API when the AdminServer is on.
func (c *ServerConfig) classpath() []string {
	cp := append([]string{filepath.Join(c.Dir, "conf")}, jars()...)
	if c.adminEnabled() {
		cp = append(cp, servletJar)
	}
	return cp
}

// FreePorts returns n distinct TCP ports on 127.0.0.1 that were free a moment ago: each is
// picked by the kernel for a listener on port 0, and all n listeners are closed before it
// returns. Another process may take one before it is used; a caller whose server then fails to
// bind picks again.
func FreePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("apachezk: free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// curatorJars are Debian's Curator jars (libcurator-framework-java, libcurator-recipes-java); the
// recipes jar's manifest names curator-framework, curator-client, guava and ZooKeeper.
var curatorJars = []string{"/usr/share/java/curator-recipes.jar", "/usr/share/java/curator-framework.jar", "/usr/share/java/curator-client.jar"}

// CuratorClasspath returns the classpath a Java program using Curator 5.4 and the ZooKeeper
// client runs with, or an error saying what to install.
func CuratorClasspath() (string, error) {
	if err := Installed(); err != nil {
		return "", err
	}
	for _, j := range curatorJars {
		if _, err := os.Stat(j); err != nil {
			return "", fmt.Errorf("apachezk: Curator is not installed (apt-get install libcurator-framework-java libcurator-recipes-java): %w", err)
		}
	}
	return curatorJars[0] + ":" + Jar, nil
}
