package launch

import (
	"fmt"
	"strings"
)

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

// SplitShellWords splits s into words as a POSIX shell would, without any
// expansion: blanks separate words, 'single quotes' keep everything
// literally, "double quotes" keep everything but \" \\ \$ \` and
// backslash-newline, and a backslash outside quotes keeps the next
// character. So --launcher_args "-o 'ProxyCommand=ssh -W %h:%p gw' -i key"
// is four words. $VAR, `cmd`, globs and ~ are left as they are: the words
// are passed to ssh or srun, not to a shell.
func SplitShellWords(s string) ([]string, error) {
	var words []string
	var cur strings.Builder
	inWord := false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		case c == '\'':
			end := strings.IndexByte(s[i+1:], '\'')
			if end < 0 {
				return nil, fmt.Errorf("%q: the single quote at byte %d is never closed", s, i)
			}
			cur.WriteString(s[i+1 : i+1+end])
			i += end + 1
			inWord = true
		case c == '"':
			j := i + 1
			for ; j < len(s) && s[j] != '"'; j++ {
				if s[j] == '\\' && j+1 < len(s) && strings.IndexByte("\"\\$`\n", s[j+1]) >= 0 {
					j++
					if s[j] != '\n' {
						cur.WriteByte(s[j])
					}
					continue
				}
				cur.WriteByte(s[j])
			}
			if j >= len(s) {
				return nil, fmt.Errorf("%q: the double quote at byte %d is never closed", s, i)
			}
			i = j
			inWord = true
		case c == '\\':
			if i+1 >= len(s) {
				return nil, fmt.Errorf("%q ends with a backslash that escapes nothing", s)
			}
			i++
			if s[i] != '\n' { // backslash-newline joins lines
				cur.WriteByte(s[i])
				inWord = true
			}
		default:
			cur.WriteByte(c)
			inWord = true
		}
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words, nil
}
