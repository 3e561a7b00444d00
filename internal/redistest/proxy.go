package redistest

import (
	"bufio"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Proxy is a TCP proxy on loopback in front of one Redis node or sentinel,
// which a test can cut. While cut, bytes go nowhere in either direction and
// new connections are held without an answer: a network partition as both
// ends see it, so the process must notice by its own timeouts. At the end
// of a cut every connection that lived through it is closed, as its TCP
// retransmissions would eventually have failed.
type Proxy struct {
	Addr   string
	target string
	ln     net.Listener
	// rewrite, when set, parses the replies as RESP and rewrites them
	// (a sentinel's replies carry the addresses of nodes).
	rewrite func(*respValue)
	cut     atomic.Bool
	// replied is when the target's last bytes reached a client (unix ns).
	replied atomic.Int64

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

// StartProxy starts a proxy to target, closed with the test.
func StartProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	p := listenProxy(t, target)
	go p.serve()
	return p
}

// listenProxy is a proxy that listens but does not serve yet (Proxies
// sets its rewrite first).
func listenProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("proxy listen: %v", err)
	}
	p := &Proxy{Addr: ln.Addr().String(), target: target, ln: ln, conns: map[net.Conn]struct{}{}}
	t.Cleanup(func() { _ = ln.Close(); p.closeAll() })
	return p
}

// Cut starts a partition between the proxy's clients and its target.
func (p *Proxy) Cut() { p.cut.Store(true) }

// Heal ends the partition: the connections it held are closed, new ones
// flow again.
func (p *Proxy) Heal() {
	p.closeAll()
	p.cut.Store(false)
}

func (p *Proxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.track(c)
		go p.handle(c)
	}
}

func (p *Proxy) handle(c net.Conn) {
	if p.cut.Load() {
		// Held without an answer until Heal closes it.
		_, _ = io.Copy(io.Discard, c)
		p.drop(c)
		return
	}
	up, err := net.DialTimeout("tcp", p.target, 2*time.Second)
	if err != nil {
		// The target is down (a killed node): refuse, as it would.
		p.drop(c)
		return
	}
	p.track(up)
	go p.pipe(up, c, nil, false)
	p.pipe(c, up, p.rewrite, true)
}

// pipe copies src to dst until either ends, dropping what it reads while
// the proxy is cut.
func (p *Proxy) pipe(dst, src net.Conn, rewrite func(*respValue), reply bool) {
	defer p.drop(src)
	defer p.drop(dst)
	r := bufio.NewReaderSize(src, 64<<10)
	buf := make([]byte, 64<<10)
	for {
		var chunk []byte
		if rewrite != nil {
			v, err := readRESP(r)
			if err != nil {
				return
			}
			rewrite(v)
			chunk = v.append(nil)
		} else {
			n, err := r.Read(buf)
			if err != nil {
				return
			}
			chunk = buf[:n]
		}
		if p.cut.Load() {
			continue
		}
		if _, err := dst.Write(chunk); err != nil {
			return
		}
		if reply {
			p.replied.Store(time.Now().UnixNano())
		}
	}
}

func (p *Proxy) track(c net.Conn) {
	p.mu.Lock()
	p.conns[c] = struct{}{}
	p.mu.Unlock()
}

func (p *Proxy) drop(c net.Conn) {
	_ = c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	p.mu.Unlock()
}

func (p *Proxy) closeAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		_ = c.Close()
		delete(p.conns, c)
	}
}

// Proxies puts one proxy in front of every node and sentinel of a Sentinel
// deployment, for one process. The proxied sentinels hand out the proxies'
// addresses in place of the nodes' and the other sentinels' (in replies
// and in +switch-master messages), so everything that process says to
// Redis, before and after a failover, passes through a proxy it can cut.
type Proxies struct {
	// SentinelAddrs are the addresses the process is to be given.
	SentinelAddrs []string
	all           []*Proxy
}

// Proxies starts the proxies of one process.
func (sn *Sentinel) Proxies(t testing.TB) *Proxies {
	t.Helper()
	ports := map[string]string{}
	ps := &Proxies{}
	add := func(target string) *Proxy {
		p := listenProxy(t, target)
		ports[portOf(target)] = portOf(p.Addr)
		ps.all = append(ps.all, p)
		return p
	}
	add(sn.Master.Addr)
	add(sn.Replica.Addr)
	var sentinels []*Proxy
	for _, addr := range sn.SentinelAddrs {
		sentinels = append(sentinels, add(addr))
	}
	for _, p := range sentinels {
		p.rewrite = func(v *respValue) { v.mapPorts(ports) }
		ps.SentinelAddrs = append(ps.SentinelAddrs, p.Addr)
	}
	// Served only now: ports and rewrite are complete, and never written
	// again.
	for _, p := range ps.all {
		go p.serve()
	}
	return ps
}

// Cut partitions the process from every node and sentinel.
func (ps *Proxies) Cut() {
	for _, p := range ps.all {
		p.Cut()
	}
}

// Heal ends the partition.
func (ps *Proxies) Heal() {
	for _, p := range ps.all {
		p.Heal()
	}
}

// LastReply is when Redis (a node or a sentinel) last answered the
// process through these proxies: after Heal, the moment it reconnected.
func (ps *Proxies) LastReply() time.Time {
	var last int64
	for _, p := range ps.all {
		last = max(last, p.replied.Load())
	}
	return time.Unix(0, last)
}

func portOf(addr string) string {
	_, port, _ := net.SplitHostPort(addr)
	return port
}
