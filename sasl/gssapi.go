package sasl

import (
	"encoding/binary"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/jcmturner/gokrb5/v8/crypto"
	"github.com/jcmturner/gokrb5/v8/gssapi"
	"github.com/jcmturner/gokrb5/v8/iana/keyusage"
	"github.com/jcmturner/gokrb5/v8/keytab"
	"github.com/jcmturner/gokrb5/v8/spnego"
	"github.com/jcmturner/gokrb5/v8/types"
)

// The GSSAPI SASL mechanism (RFC 4752) over Kerberos V5 (RFC 4121), with gokrb5 doing the
// Kerberos work: decoding and verifying the client's AP-REQ against the service keytab, and the
// checksums of the wrap tokens of the security-layer negotiation. Only "no security layer" is
// offered, as ZooKeeper's server does by default (qop auth).
//
// The exchange, as Java's GSSAPI SASL client runs it:
//
//	client: the GSS-API initial context token (the AP-REQ)
//	server: a wrap token of 4 bytes: the layers offered (1 = none) and the largest message (3 bytes)
//	client: a wrap token of 4 bytes, the layer chosen and its largest message, then an optional
//	        authorization id
//	server: no token; the client is authenticated as the ticket's client principal
//
// Mutual authentication (an AP-REP from the server) is not offered: a client that requires it is
// refused. Java's client does not ask for it; neither do the others ZooKeeper users run.

// gssNoSecurityLayer is RFC 4752's bit for "no security layer".
const gssNoSecurityLayer = 1

// gssMutualFlag is GSS_C_MUTUAL_FLAG in the authenticator checksum's flags (RFC 4121 4.1.1.1).
const gssMutualFlag = 2

// gssChecksumType is the authenticator checksum type GSS-API uses (RFC 4121 4.1.1).
const gssChecksumType = 0x8003

// keytabCache loads a keytab once per Config.
type keytabCache struct {
	once sync.Once
	kt   *keytab.Keytab
	err  error
}

func (c *Config) keytab() (*keytab.Keytab, error) {
	c.kt.once.Do(func() {
		b, err := os.ReadFile(c.Kerberos.KeyTab)
		if err != nil {
			c.kt.err = fmt.Errorf("sasl: keytab: %w", err)
			return
		}
		kt := keytab.New()
		if err := kt.Unmarshal(b); err != nil {
			c.kt.err = fmt.Errorf("sasl: keytab %s: %w", c.Kerberos.KeyTab, err)
			return
		}
		c.kt.kt = kt
	})
	return c.kt.kt, c.kt.err
}

// CheckKerberos loads the keytab and checks that it holds keys of the service principal, so a
// server with a wrong keytab stops at start rather than refusing every client.
func (c *Config) CheckKerberos() error {
	if c.Kerberos == nil {
		return nil
	}
	kt, err := c.keytab()
	if err != nil {
		return err
	}
	name, realm := splitPrincipal(c.Kerberos.Principal)
	if realm == "" {
		return fmt.Errorf("sasl: principal %q has no realm", c.Kerberos.Principal)
	}
	for _, e := range kt.Entries {
		if e.Principal.Realm == realm && types.NewPrincipalName(0, name).Equal(types.PrincipalName{NameType: 0, NameString: e.Principal.Components}) {
			return nil
		}
	}
	return fmt.Errorf("sasl: keytab %s holds no key of %s", c.Kerberos.KeyTab, c.Kerberos.Principal)
}

func splitPrincipal(p string) (name, realm string) {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] == '@' {
			return p[:i], p[i+1:]
		}
	}
	return p, ""
}

type gssExchange struct {
	cfg     *Config
	step    int
	key     types.EncryptionKey // the key the wrap tokens are protected with
	seq     uint64              // the acceptor's sequence number (the initiator's, without an AP-REP)
	peer    string              // the client principal, name@REALM
	id      string
	maxSize uint32
}

func newGSSExchange(cfg *Config) (*gssExchange, error) {
	if _, err := cfg.keytab(); err != nil {
		return nil, err
	}
	return &gssExchange{cfg: cfg, maxSize: 65536}, nil
}

func (g *gssExchange) Mechanism() string { return "GSSAPI" }
func (g *gssExchange) ID() string        { return g.id }

func (g *gssExchange) Next(token []byte) ([]byte, bool, error) {
	g.step++
	switch g.step {
	case 1:
		if err := g.accept(token); err != nil {
			return nil, false, err
		}
		offer := make([]byte, 4)
		binary.BigEndian.PutUint32(offer, g.maxSize)
		offer[0] = gssNoSecurityLayer
		out, err := g.wrap(offer)
		return out, false, err
	case 2:
		msg, err := g.unwrap(token)
		if err != nil {
			return nil, false, err
		}
		if len(msg) < 4 {
			return nil, false, failf("GSSAPI: security layer answer of %d bytes", len(msg))
		}
		if msg[0] != gssNoSecurityLayer {
			return nil, false, failf("GSSAPI: client chose security layer %#x; only none (1) was offered", msg[0])
		}
		authzid := string(msg[4:])
		if authzid != "" && authzid != g.peer {
			// ZooKeeper's handler authorizes anyone, then names the client after its
			// authentication id; an authzid naming someone else is not honoured either way.
			return nil, false, failf("GSSAPI: %s asked to act as %q", g.peer, authzid)
		}
		id, err := g.cfg.canonical(g.peer)
		if err != nil {
			return nil, false, failf("GSSAPI: %v", err)
		}
		g.id = id
		return nil, true, nil
	}
	return nil, false, failf("GSSAPI exchange already finished")
}

// accept verifies the client's AP-REQ and sets up the context's key and sequence number.
func (g *gssExchange) accept(token []byte) error {
	var tok spnego.KRB5Token
	if err := tok.Unmarshal(token); err != nil {
		return failf("GSSAPI: initial token: %v", err)
	}
	if !tok.IsAPReq() {
		return failf("GSSAPI: initial token is not an AP-REQ")
	}
	kt, _ := g.cfg.keytab()
	name, realm := splitPrincipal(g.cfg.Kerberos.Principal)
	if t := tok.APReq.Ticket; t.Realm != realm || t.SName.PrincipalNameString() != name {
		// Only tickets for this server's own principal, as Java's acceptor takes them, even if
		// the keytab holds other keys.
		return failf("GSSAPI: ticket for %s@%s, not %s", t.SName.PrincipalNameString(), t.Realm, g.cfg.Kerberos.Principal)
	}
	// APReq.Verify decrypts the ticket with the keytab, checks its times, decrypts the
	// authenticator and checks the clock skew. gokrb5's service.VerifyAPREQ would add a replay
	// check, but its cache is process-wide with a goroutine that never ends; Config keeps its own.
	ok, err := tok.APReq.Verify(kt, maxClockSkew, types.HostAddress{}, nil)
	if err != nil || !ok {
		return failf("GSSAPI: AP-REQ refused: %v", err)
	}
	auth := tok.APReq.Authenticator
	if auth.CRealm != tok.APReq.Ticket.DecryptedEncPart.CRealm {
		return failf("GSSAPI: authenticator realm %q is not the ticket's", auth.CRealm)
	}
	peer := auth.CName.PrincipalNameString() + "@" + auth.CRealm
	if !g.cfg.replays.fresh(peer, auth.CTime, auth.Cusec, time.Now()) {
		return failf("GSSAPI: replayed authenticator of %s", peer)
	}
	if auth.Cksum.CksumType != gssChecksumType || len(auth.Cksum.Checksum) < 24 {
		return failf("GSSAPI: authenticator has no GSS-API checksum")
	}
	flags := binary.LittleEndian.Uint32(auth.Cksum.Checksum[20:24])
	if flags&gssMutualFlag != 0 {
		return failf("GSSAPI: the client requires mutual authentication, which zkd does not offer")
	}
	g.key = tok.APReq.Ticket.DecryptedEncPart.Key
	if auth.SubKey.KeyType != 0 && len(auth.SubKey.KeyValue) > 0 {
		g.key = auth.SubKey
	}
	g.seq = uint64(auth.SeqNumber)
	g.peer = peer
	return nil
}

// maxClockSkew is Kerberos' usual allowance between the client's clock and ours.
const maxClockSkew = 5 * time.Minute

// replayCache remembers the authenticators accepted within the clock skew, so a captured AP-REQ
// cannot be played again (RFC 4120 3.2.3). Entries are dropped as they age past the skew, on the
// next insert: no goroutine.
type replayCache struct {
	mu   sync.Mutex
	seen map[replayKey]time.Time // when the entry may be dropped
}

type replayKey struct {
	client string
	ctime  int64 // the authenticator's time, in microseconds
}

// fresh records an authenticator and reports whether it was not seen before.
func (r *replayCache) fresh(client string, ctime time.Time, cusec int, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.seen == nil {
		r.seen = map[replayKey]time.Time{}
	}
	for k, until := range r.seen {
		if now.After(until) {
			delete(r.seen, k)
		}
	}
	k := replayKey{client, ctime.Unix()*1e6 + int64(cusec)}
	if _, dup := r.seen[k]; dup {
		return false
	}
	r.seen[k] = now.Add(2 * maxClockSkew)
	return true
}

// wrap makes an acceptor's wrap token (RFC 4121, integrity only) of msg.
func (g *gssExchange) wrap(msg []byte) ([]byte, error) {
	etype, err := crypto.GetEtype(g.key.KeyType)
	if err != nil {
		return nil, fmt.Errorf("sasl: GSSAPI wrap: %w", err)
	}
	wt := gssapi.WrapToken{Flags: 0x01, EC: uint16(etype.GetHMACBitLength() / 8), SndSeqNum: g.seq, Payload: msg}
	if err := wt.SetCheckSum(g.key, keyusage.GSSAPI_ACCEPTOR_SEAL); err != nil {
		return nil, fmt.Errorf("sasl: GSSAPI wrap: %w", err)
	}
	g.seq++
	return wt.Marshal()
}

// unwrap checks an initiator's wrap token (RFC 4121, integrity only) and returns its message.
func (g *gssExchange) unwrap(token []byte) ([]byte, error) {
	if len(token) < gssapi.HdrLen {
		return nil, failf("GSSAPI: wrap token of %d bytes", len(token))
	}
	if token[2]&0x02 != 0 {
		return nil, failf("GSSAPI: sealed wrap token, but no security layer was negotiated")
	}
	// Undo the right rotation of everything after the header (RRC, RFC 4121 4.2.5).
	b := append([]byte(nil), token...)
	if rrc := int(binary.BigEndian.Uint16(b[6:8])); rrc != 0 {
		body := b[gssapi.HdrLen:]
		if len(body) > 0 {
			rrc %= len(body)
			rot := append(append([]byte(nil), body[rrc:]...), body[:rrc]...)
			copy(body, rot)
		}
		binary.BigEndian.PutUint16(b[6:8], 0)
	}
	var wt gssapi.WrapToken
	if err := wt.Unmarshal(b, false); err != nil {
		return nil, failf("GSSAPI: wrap token: %v", err)
	}
	ok, err := wt.Verify(g.key, keyusage.GSSAPI_INITIATOR_SEAL)
	if err != nil || !ok {
		return nil, failf("GSSAPI: wrap token checksum: %v", err)
	}
	return wt.Payload, nil
}
