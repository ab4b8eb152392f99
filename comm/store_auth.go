package comm

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
)

// The store handshake. Nothing else is read from or served to a connection
// before it completes, and every step has a fixed size, so an
// unauthenticated client can make rank 0 hold at most a few dozen bytes.
//
//	server → client  magic "GTSTORE3", server nonce (32), job id length (u8), job id
//	client → server  client nonce (32), rank (u32), job id length (u8), job id,
//	                 HMAC(K, "client" ‖ server nonce ‖ client nonce ‖ rank ‖ job id)
//	server → client  authAccepted, HMAC(K, "server" ‖ server nonce ‖ client nonce)
//	                 or authRefused / authWrongJob / authBusy, then close
//
// K is derived from the job secret and the job id (storeKey). The client
// answers a fresh server nonce, so a recorded answer is useless later; the
// server answers the client's nonce, so a listener that does not know the
// secret (a foreign process on MASTER_PORT) cannot pass as rank 0. The
// labels differ per direction and per purpose (the peer mesh uses PeerKey),
// so no proof can be replayed in another place. The job ids and the
// client's rank travel in the clear: they are names, not secrets, and let
// both sides say which rank of which job was refused, at once, instead of
// one side failing with a bare "wrong secret" and the other waiting out the
// rendezvous timeout in silence. A client of another job still sends its
// answer, so rank 0 learns why it will not join.
const (
	storeMagic = "GTSTORE3"
	// MaxJobIDLen bounds a job id so it fits the handshake's one-byte length.
	MaxJobIDLen = 128

	authAccepted uint8 = 1
	authRefused  uint8 = 2 // the proof was wrong
	authBusy     uint8 = 3 // too many ranks connected
	authWrongJob uint8 = 4 // the client belongs to another job
)

// storeKey is the store's HMAC key for a job.
func storeKey(secret []byte, jobID string) []byte {
	return deriveKey(secret, "gotrain/store/v2", jobID)
}

// peerKey is the key ranks of a job use between themselves for purpose.
func peerKey(secret []byte, jobID, purpose string) []byte {
	return deriveKey(secret, "gotrain/peer/v2", jobID, purpose)
}

// deriveKey is HMAC(secret, label ‖ 0 ‖ parts joined by 0): one key per use,
// none of which reveals the secret or another key.
func deriveKey(secret []byte, label string, parts ...string) []byte {
	m := hmac.New(sha256.New, secret)
	io.WriteString(m, label)
	for _, p := range parts {
		m.Write([]byte{0})
		io.WriteString(m, p)
	}
	return m.Sum(nil)
}

// Proof is HMAC-SHA256(key, role ‖ 0 ‖ parts...), the answer a side of a
// handshake gives to prove it holds key. Role names the side ("client",
// "server", "dialer", "acceptor"), so one side's proof never verifies as the
// other's. Exported for comm/tcp's peer hello, which derives its key with
// Store.PeerKey.
func Proof(key []byte, role string, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, key)
	io.WriteString(m, role)
	m.Write([]byte{0})
	for _, p := range parts {
		m.Write(p)
	}
	return m.Sum(nil)
}

// NonceSize and MACSize are the sizes of a handshake's nonces and proofs.
const (
	NonceSize = 32
	MACSize   = sha256.Size
)

// NewNonce returns NonceSize fresh random bytes.
func NewNonce() ([]byte, error) {
	n := make([]byte, NonceSize)
	if _, err := rand.Read(n); err != nil {
		return nil, fmt.Errorf("rendezvous: no randomness for a handshake nonce: %w", err)
	}
	return n, nil
}

// refusal is a client the store turned away after reading its answer:
// the rank it claimed (unauthenticated: a name for messages) and why.
type refusal struct {
	rank     int
	otherJob string // the job the client belongs to, when not this one
	wrongJob bool
}

func (r *refusal) Error() string {
	if r.wrongJob {
		return fmt.Sprintf("rank %d belongs to job %s", r.rank, quoteJob(r.otherJob))
	}
	return errBadProof.Error()
}

func (r *refusal) Is(target error) bool { return target == errBadProof && !r.wrongJob }

// serverHandshake runs rank 0's side on a new connection under its
// deadline. Once the client proved the key, verdict decides its fate:
// authAccepted, authBusy, or 0 to drop it without an answer. It returns nil
// once the client was accepted and given the server's proof. A wrong proof
// is answered with authRefused and a client of another job with
// authWrongJob, so it learns within one round trip; either returns a
// *refusal naming the rank the client claimed.
func serverHandshake(c net.Conn, key []byte, jobID string, verdict func() uint8) error {
	sn, err := NewNonce()
	if err != nil {
		return err
	}
	hello := make([]byte, 0, len(storeMagic)+NonceSize+1+len(jobID))
	hello = append(hello, storeMagic...)
	hello = append(hello, sn...)
	hello = append(hello, byte(len(jobID)))
	hello = append(hello, jobID...)
	if _, err := c.Write(hello); err != nil {
		return err
	}
	var head [NonceSize + 4 + 1]byte
	if _, err := io.ReadFull(c, head[:]); err != nil {
		return err
	}
	cn, rankBytes := head[:NonceSize], head[NonceSize:NonceSize+4]
	rest := make([]byte, int(head[len(head)-1])+MACSize) // at most 255+32 bytes
	if _, err := io.ReadFull(c, rest); err != nil {
		return err
	}
	theirJob, mac := rest[:len(rest)-MACSize], rest[len(rest)-MACSize:]
	claimed := int(binary.BigEndian.Uint32(rankBytes))
	if string(theirJob) != jobID {
		c.Write([]byte{authWrongJob})
		return &refusal{rank: claimed, otherJob: string(theirJob), wrongJob: true}
	}
	if !hmac.Equal(mac, Proof(key, "client", sn, cn, rankBytes, theirJob)) {
		c.Write([]byte{authRefused})
		return &refusal{rank: claimed}
	}
	switch v := verdict(); v {
	case authAccepted:
	case 0:
		return errors.New("connection dropped during the handshake")
	default:
		c.Write([]byte{v})
		return errors.New("connection refused after its proof")
	}
	_, err = c.Write(append([]byte{authAccepted}, Proof(key, "server", sn, cn)...))
	return err
}

var errBadProof = errors.New("wrong proof of the job secret")

// handshakeError is a client handshake failure. Retry says the connection
// broke before the server decided (rank 0 starting up or shedding idle
// connections), so dialing again may succeed; a refusal or a foreign
// server does not improve by retrying.
type handshakeError struct {
	err   error
	retry bool
}

func (e *handshakeError) Error() string { return e.err.Error() }
func (e *handshakeError) Unwrap() error { return e.err }

// clientHandshake runs rank's side: it checks the server is a store of
// this job and that it knows the key, and proves this rank knows it.
// target names the store in errors; hint (may be empty) ends a refusal: where
// the secret came from and what likely differs.
func clientHandshake(c net.Conn, key []byte, rank int, jobID, target, hint string) error {
	broken := func(err error) error {
		return &handshakeError{retry: true, err: fmt.Errorf("rendezvous: the store at %s closed the connection during the handshake: %w", target, err)}
	}
	var head [len(storeMagic) + NonceSize + 1]byte
	if _, err := io.ReadFull(c, head[:len(storeMagic)]); err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return &handshakeError{err: fmt.Errorf("rendezvous: the service at %s accepted the connection but sent no store greeting: it is not a gotrain store of this version (another program on MASTER_PORT, or ranks running different gotrain versions?)", target)}
		}
		return broken(err)
	}
	if string(head[:len(storeMagic)]) != storeMagic {
		return &handshakeError{err: fmt.Errorf("rendezvous: the service at %s is not a gotrain store of this version (it greeted with %q); another program is using MASTER_PORT, or the ranks run different gotrain versions", target, head[:len(storeMagic)])}
	}
	if _, err := io.ReadFull(c, head[len(storeMagic):]); err != nil {
		return broken(err)
	}
	sn := head[len(storeMagic) : len(storeMagic)+NonceSize]
	theirs := make([]byte, head[len(head)-1])
	if _, err := io.ReadFull(c, theirs); err != nil {
		return broken(err)
	}
	cn, err := NewNonce()
	if err != nil {
		return &handshakeError{err: err}
	}
	var rankBytes [4]byte
	binary.BigEndian.PutUint32(rankBytes[:], uint32(rank))
	answer := append(bytes.Clone(cn), rankBytes[:]...)
	answer = append(answer, byte(len(jobID)))
	answer = append(answer, jobID...)
	answer = append(answer, Proof(key, "client", sn, cn, rankBytes[:], []byte(jobID))...)
	// Answered even to another job's store, so that its rank 0 can say at
	// once which rank of which job it turned away.
	_, werr := c.Write(answer)
	if string(theirs) != jobID {
		return &handshakeError{err: fmt.Errorf("rendezvous: the store at %s serves job %s but this rank belongs to job %s: another job is using MASTER_PORT (give each job its own port), or the ranks were started with different GOTRAIN_JOB_ID values",
			target, quoteJob(string(theirs)), quoteJob(jobID))}
	}
	if werr != nil {
		return broken(werr)
	}
	var verdict [1]byte
	if _, err := io.ReadFull(c, verdict[:]); err != nil {
		return broken(err)
	}
	switch verdict[0] {
	case authAccepted:
	case authRefused:
		return &handshakeError{err: fmt.Errorf("rendezvous: the store at %s refused this rank: its job secret differs from rank 0's%s", target, hintSuffix(hint))}
	case authWrongJob: // only a store whose greeting named another job sends it
		return &handshakeError{err: fmt.Errorf("rendezvous: the store at %s refused this rank as one of another job", target)}
	case authBusy:
		return &handshakeError{err: fmt.Errorf("rendezvous: the store at %s refused this rank: too many ranks are connected to it already (a rank started twice?)", target)}
	default:
		return &handshakeError{err: fmt.Errorf("rendezvous: the store at %s answered the handshake with %d, not a verdict (not a gotrain store of this version?)", target, verdict[0])}
	}
	var mac [MACSize]byte
	if _, err := io.ReadFull(c, mac[:]); err != nil {
		return broken(err)
	}
	if !hmac.Equal(mac[:], Proof(key, "server", sn, cn)) {
		return &handshakeError{err: fmt.Errorf("rendezvous: the service at %s accepted this rank without proving it knows the job secret: it is not this job's rank 0 (a foreign process on MASTER_PORT?)", target)}
	}
	return nil
}

// quoteJob shows a job id in an error.
func quoteJob(id string) string {
	if id == "" {
		return "(unnamed)"
	}
	return fmt.Sprintf("%q", id)
}

func hintSuffix(hint string) string {
	if hint == "" {
		return ""
	}
	return "; " + hint
}
