package checkpoint

// scanJSON reports whether b holds exactly one JSON value (with optional surrounding
// whitespace), by the same rules as json.Valid, and whether it has no whitespace
// outside strings. The session state is nearly all of a checkpoint's bytes and is
// opaque here, so it only needs validating, not decoding; encoding/json's scanner
// does that at a fraction of this loop's speed, and doing it on every Save and Load
// was most of their cost. FuzzScanJSON holds this function to json.Valid.
func scanJSON(b []byte) (valid, compact bool) {
	s := jsonScanner{b: b}
	if !s.value() {
		return false, false
	}
	s.skipSpace()
	if s.i != len(s.b) {
		return false, false
	}
	return true, !s.space
}

// maxDepth is encoding/json's nesting limit, so that both accept the same inputs.
const maxDepth = 10000

type jsonScanner struct {
	b     []byte
	i     int
	depth int
	space bool // whitespace seen outside strings
}

func (s *jsonScanner) skipSpace() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
			s.space = true
		default:
			return
		}
	}
}

func (s *jsonScanner) value() bool {
	s.skipSpace()
	if s.i >= len(s.b) {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '{':
		return s.object()
	case c == '[':
		return s.array()
	case c == '"':
		return s.str()
	case c == '-' || '0' <= c && c <= '9':
		return s.number()
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	}
	return false
}

func (s *jsonScanner) object() bool {
	if s.depth++; s.depth > maxDepth {
		return false
	}
	s.i++ // {
	s.skipSpace()
	if s.i < len(s.b) && s.b[s.i] == '}' {
		s.i++
		s.depth--
		return true
	}
	for {
		s.skipSpace()
		if s.i >= len(s.b) || s.b[s.i] != '"' || !s.str() {
			return false
		}
		s.skipSpace()
		if s.i >= len(s.b) || s.b[s.i] != ':' {
			return false
		}
		s.i++
		if !s.value() {
			return false
		}
		s.skipSpace()
		if s.i >= len(s.b) {
			return false
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case '}':
			s.i++
			s.depth--
			return true
		default:
			return false
		}
	}
}

func (s *jsonScanner) array() bool {
	if s.depth++; s.depth > maxDepth {
		return false
	}
	s.i++ // [
	s.skipSpace()
	if s.i < len(s.b) && s.b[s.i] == ']' {
		s.i++
		s.depth--
		return true
	}
	for {
		if !s.value() {
			return false
		}
		s.skipSpace()
		if s.i >= len(s.b) {
			return false
		}
		switch s.b[s.i] {
		case ',':
			s.i++
		case ']':
			s.i++
			s.depth--
			return true
		default:
			return false
		}
	}
}

// str scans a string starting at its opening quote. Like json.Valid it does not
// check UTF-8: invalid bytes are kept as they are.
func (s *jsonScanner) str() bool {
	b := s.b
	i := s.i + 1
	for i < len(b) {
		c := b[i]
		switch {
		case c == '"':
			s.i = i + 1
			return true
		case c == '\\':
			if i+1 >= len(b) {
				return false
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+5 >= len(b) {
					return false
				}
				for _, h := range b[i+2 : i+6] {
					if !isHex(h) {
						return false
					}
				}
				i += 6
			default:
				return false
			}
		case c < 0x20:
			return false
		default:
			i++
		}
	}
	return false
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func (s *jsonScanner) number() bool {
	b := s.b
	i := s.i
	if b[i] == '-' {
		i++
	}
	if i >= len(b) {
		return false
	}
	switch {
	case b[i] == '0':
		i++
	case '1' <= b[i] && b[i] <= '9':
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(b) && b[i] == '.' {
		i++
		start := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		if i == start {
			return false
		}
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		start := i
		for i < len(b) && '0' <= b[i] && b[i] <= '9' {
			i++
		}
		if i == start {
			return false
		}
	}
	s.i = i
	return true
}

func (s *jsonScanner) literal(word string) bool {
	if len(s.b)-s.i < len(word) || string(s.b[s.i:s.i+len(word)]) != word {
		return false
	}
	s.i += len(word)
	return true
}
