package hftok

import "unicode/utf8"

// Byte-level BPE (GPT-2's bytes_to_unicode, tokenizers' byte_level.rs)
// spells every byte as one printable character, so vocabulary entries and
// merges are strings of those characters: bytes 0x21-0x7E, 0xA1-0xAC and
// 0xAE-0xFF stand for themselves; the other 68, in increasing order
// (0x00-0x20, 0x7F-0xA0, 0xAD), are U+0100 to U+0143. Both directions are
// arithmetic, so no table is kept.

// byteRune is the character that spells byte b.
func byteRune(b byte) rune {
	switch {
	case b >= 0x21 && b <= 0x7E, b >= 0xA1 && b <= 0xAC, b >= 0xAE:
		return rune(b)
	case b <= 0x20:
		return 0x100 + rune(b)
	case b <= 0xA0: // 0x7F..0xA0 follow the 33 bytes 0x00..0x20
		return 0x100 + 33 + rune(b-0x7F)
	default: // 0xAD, the last of the 68
		return 0x100 + 67
	}
}

// runeByte is the byte that character r spells, if r is one of the 256.
func runeByte(r rune) (byte, bool) {
	switch {
	case r >= 0x21 && r <= 0x7E, r >= 0xA1 && r <= 0xAC, r >= 0xAE && r <= 0xFF:
		return byte(r), true
	case r >= 0x100 && r < 0x100+33:
		return byte(r - 0x100), true
	case r >= 0x100+33 && r < 0x100+67:
		return byte(r-0x100-33) + 0x7F, true
	case r == 0x100+67:
		return 0xAD, true
	}
	return 0, false
}

// unByteLevel turns a byte-level token string back into the bytes it spells;
// ok is false if some character is not one of the 256 (an added token such
// as "<think>" is all printable ASCII, so it maps to itself).
func unByteLevel(s string) (string, bool) {
	b := make([]byte, 0, len(s))
	for _, r := range s {
		c, ok := runeByte(r)
		if !ok {
			return "", false
		}
		b = append(b, c)
	}
	return string(b), true
}

// byteLevel spells raw bytes as byte-level characters.
func byteLevel(raw string) string {
	b := make([]byte, 0, 2*len(raw))
	for i := 0; i < len(raw); i++ {
		b = utf8.AppendRune(b, byteRune(raw[i]))
	}
	return string(b)
}
