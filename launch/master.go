package launch

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"time"
)

// A MASTER_ADDR that cannot be reached is not an error the rendezvous can
// tell from a rank 0 that is slow to start, so the ranks would retry for
// the whole --comm-timeout. A name that is not a host at all, or does not
// resolve, is caught here before anything starts.

// Resolver looks up host names; *net.Resolver is one.
type Resolver interface {
	LookupHost(ctx context.Context, host string) ([]string, error)
}

// resolveTimeout bounds the lookup of MASTER_ADDR.
const resolveTimeout = 10 * time.Second

// ValidateMasterAddr checks that addr has the shape of a host name or an IP
// address, without looking it up. The errors name the usual mistakes: a
// user@ prefix copied from a hostfile or ssh destination, a port that
// belongs in MASTER_PORT, brackets around an IPv6 address.
func ValidateMasterAddr(addr string) error {
	switch {
	case addr == "":
		return fmt.Errorf("MASTER_ADDR is empty; give the host name or IP address of rank 0's machine")
	case strings.Contains(addr, "@"):
		return fmt.Errorf("MASTER_ADDR %q has a user name in it; give the host alone, %q (a hostfile's user@ is for ssh only)", addr, HostOf(addr))
	case isIP(addr):
		return nil
	case strings.HasPrefix(addr, "[") && strings.HasSuffix(addr, "]") && isIP(addr[1:len(addr)-1]):
		return fmt.Errorf("MASTER_ADDR %q: give the IPv6 address without brackets, %s", addr, addr[1:len(addr)-1])
	case strings.Contains(addr, ":"):
		if h, p, err := net.SplitHostPort(addr); err == nil {
			return fmt.Errorf("MASTER_ADDR %q includes a port; set MASTER_ADDR=%s and MASTER_PORT=%s (--master_addr, --master_port)", addr, h, p)
		}
		return fmt.Errorf("MASTER_ADDR %q is neither a host name nor an IP address", addr)
	}
	for _, r := range addr {
		if r <= ' ' || r == 0x7f || strings.ContainsRune("/\\'\"`$;&|<>()[]{}*?!#,=", r) {
			return fmt.Errorf("MASTER_ADDR %q is not a host name: %q cannot be part of one", addr, r)
		}
	}
	return nil
}

// CheckMasterAddr validates addr (ValidateMasterAddr) and, unless it is an
// IP address, resolves it through r (net.DefaultResolver), so that a name
// this machine cannot resolve fails at once instead of after the
// rendezvous timeout.
func CheckMasterAddr(ctx context.Context, r Resolver, addr string) error {
	if err := ValidateMasterAddr(addr); err != nil {
		return err
	}
	if isIP(addr) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, resolveTimeout)
	defer cancel()
	addrs, err := r.LookupHost(ctx, addr)
	if err == nil && len(addrs) == 0 {
		err = fmt.Errorf("no addresses")
	}
	if err != nil {
		return fmt.Errorf("MASTER_ADDR %q does not resolve on this machine (%v); give --master_addr (or MASTER_ADDR) a host name or IP address that every node can reach", addr, err)
	}
	return nil
}

// isIP reports whether s is an IPv4 or IPv6 address, with or without a zone
// (fe80::1%eth0).
func isIP(s string) bool {
	_, err := netip.ParseAddr(s)
	return err == nil
}
