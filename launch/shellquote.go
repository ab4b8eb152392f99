package launch

import "strings"

// ShellQuote returns s as one POSIX shell word: unchanged when it holds only
// characters no shell treats specially, otherwise in single quotes, each
// embedded single quote closing the quotes, escaped, and reopening them:
//
//	a'b  becomes  'a'\''b'
//
// Callers never put a quoted word in command position, where NAME=value
// would be an assignment; a leading '=' is quoted because zsh expands =cmd
// to a path.
func ShellQuote(s string) string {
	if s == "" {
		return "''"
	}
	safe := true
	for i, r := range s {
		if !shellSafe(r) && (r != '=' || i == 0) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// ShellJoin quotes every word with ShellQuote and joins them with spaces.
func ShellJoin(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = ShellQuote(w)
	}
	return strings.Join(q, " ")
}

func shellSafe(r rune) bool {
	switch {
	case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		return true
	}
	return strings.ContainsRune("-_./:,@%+", r)
}
