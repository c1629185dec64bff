package actions

import "testing"

// TestServerReason: class-validator's multi-line text (as a real 6.5.0
// answers the import routes) comes out on one line, each property once,
// the server's own sentences kept.
func TestServerReason(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"property factors[0].levels[1].payload.value has failed the following constraints: isString \n - property factors[1].levels[0].payload.value has failed the following constraints: isString \n",
			"UpGrade's checks fail on factors[0].levels[1].payload.value (isString), factors[1].levels[0].payload.value (isString)"},
		{"An instance of SegmentInputValidator has failed the validation:\n - property type has failed the following constraints: isEnum, isNotEmpty \n, An instance of SegmentInputValidator has failed the validation:\n - property userIds has failed the following constraints: isString, isArray \n",
			"UpGrade's checks fail on type (isEnum, isNotEmpty), userIds (isString, isArray)"},
		{"property name has failed the following constraints: isNotEmpty \n, The app context \"nope\" is not defined in CONTEXT_METADATA.",
			"UpGrade's checks fail on name (isNotEmpty); The app context \"nope\" is not defined in CONTEXT_METADATA."},
		{"Invalid JSON", "Invalid JSON"},
		{"  two\n lines ", "two lines"},
	} {
		if got := serverReason(tc.in); got != tc.want {
			t.Errorf("serverReason(%q)\n got %q\nwant %q", tc.in, got, tc.want)
		}
	}
}
