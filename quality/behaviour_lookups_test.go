package quality

import (
	"strings"
	"testing"
)

// The habits real models have with the eight feature flag, segment and
// history lookups: explicit defaults, empty strings and lists, nulls,
// numbers as strings, display names, other cases and stray spaces, one key
// per call, text next to the calls, a provider ignoring tool_choice, groups
// written every way. Nothing changes on the server, and explaining a flag
// records no exposure.

// flagInfo is a question answered by flag and segment lookups; the
// backend keeps its seeds and no flag was evaluated through the client API.
func flagInfo(name, say, reads string, want turnWant) behaviourCase {
	c := named(name, info(say, reads, want))
	// The analyzer, each reply of reads, the gatherer's last line, the
	// responder.
	c.steps[0].want.calls = 3 + strings.Count("\n"+reads, "\n- ")
	c.backend = append(c.backend, flagsSeeded())
	return c
}

// Fragments of tool results the lookups send.
const (
	mathKey    = `"key":"MATH_HINTS"`
	readingKey = `"key":"READING_AID"`
)

func TestHabitFlagLookups(t *testing.T) {
	t.Parallel()
	both := turnWant{seen: []string{mathKey, readingKey}}
	enabled := turnWant{seen: []string{readingKey}, unseen: []string{mathKey}}
	math := turnWant{seen: []string{mathKey}, unseen: []string{readingKey}}
	mathDetails := turnWant{seen: []string{"{{id:MATH_HINTS}}", "{{id:MATH_HINTS exclude}}", `"u9"`}}
	readingDetails := turnWant{seen: []string{"{{id:READING_AID}}", "{{id:READING_AID include}}", `"c7"`}}
	segments := turnWant{seen: []string{`"name":"pilot schools"`, `"name":"reading club"`}}
	pilot := turnWant{seen: []string{"{{id:pilot schools}}", `"u1"`, `"u2"`}}
	club := turnWant{seen: []string{"{{id:reading club}}", `"r1"`}}
	runBehaviour(t, []behaviourCase{
		// get_feature_flags
		flagInfo("flags, explicit nulls", "Which feature flags are there?",
			"- call: {get_feature_flags: {context: null, status: null, key: null}}\n", both),
		flagInfo("flags, empty strings", "Which feature flags are there?",
			`- call: {get_feature_flags: {context: "", status: "", key: ""}}`+"\n", both),
		flagInfo("flags, null arguments object", "Which feature flags are there?",
			rawCall("get_feature_flags", "null"), both),
		flagInfo("flags, status as a display name", "Which flags are on?",
			"- call: {get_feature_flags: {status: Enabled}}\n", enabled),
		flagInfo("flags, status in upper case with blanks", "Which flags are on?",
			`- call: {get_feature_flags: {status: " ENABLED "}}`+"\n", enabled),
		flagInfo("flags, status as on", "Which flags are on?",
			"- call: {get_feature_flags: {status: \"on\"}}\n", enabled),
		flagInfo("flags, context in another case with blanks", "Which flags does assign-prog have?",
			`- call: {get_feature_flags: {context: " Assign-Prog "}}`+"\n", both),
		flagInfo("flags, key in another case", "Is there a math hints flag?",
			`- call: {get_feature_flags: {key: " Math_Hints "}}`+"\n", math),
		flagInfo("flags, unknown status corrected", "Which flags are on?",
			"- call: {get_feature_flags: {status: running}}\n"+"- call: {get_feature_flags: {status: enabled}}\n",
			turnWant{seen: []string{readingKey}, unseen: []string{mathKey}, toolError: []string{"status", `"running"`, "enabled, disabled or archived"}}),
		flagInfo("flags, status as a list corrected", "Which flags are on?",
			"- call: {get_feature_flags: {status: [enabled, disabled]}}\n"+"- call: {get_feature_flags: {status: enabled}}\n",
			turnWant{seen: []string{readingKey}, unseen: []string{mathKey}, toolError: []string{"status", "a list", "string"}}),
		// find_feature_flag
		flagInfo("find flag, name in another case with blanks", "Tell me about the math hints flag.",
			`- call: {find_feature_flag: {name_or_key: " math HINTS "}}`+"\n", mathDetails),
		flagInfo("find flag, key in lower case", "Tell me about reading_aid.",
			"- call: {find_feature_flag: {name_or_key: reading_aid}}\n", readingDetails),
		flagInfo("find flag, part of a name", "Is there a flag for reading?",
			"- call: {find_feature_flag: {name_or_key: Reading}}\n", readingDetails),
		flagInfo("find flag, a name field corrected", "Tell me about the math hints flag.",
			"- call: {find_feature_flag: {name: Math hints}}\n"+"- call: {find_feature_flag: {name_or_key: Math hints}}\n",
			turnWant{seen: mathDetails.seen, toolError: []string{"name", "unknown field", "name_or_key"}}),
		// get_feature_flag_details
		flagInfo("flag details by key in another case", "Show the math_hints flag.",
			"- call: {get_feature_flag_details: {flag_id: math_hints}}\n", mathDetails),
		flagInfo("flag details by name", "Show the Reading aid flag.",
			"- call: {get_feature_flag_details: {flag_id: READING AID}}\n", readingDetails),
		flagInfo("flag details by upper-case id with blanks", "Show flag {{id:MATH_HINTS}}.",
			`- call: {get_feature_flag_details: {flag_id: " {{upper:MATH_HINTS}} "}}`+"\n", mathDetails),
		flagInfo("flag details, one key per call", "Show both flags.",
			parallel("get_feature_flag_details: {flag_id: MATH_HINTS}", "get_feature_flag_details: {flag_id: READING_AID}",
				"get_feature_flag_details: {flag_id: MATH_HINTS}"), readingDetails),
		flagInfo("flag details, unknown flag corrected", "Show the hint flag.",
			"- call: {get_feature_flag_details: {flag_id: HINTZ}}\n"+"- call: {get_feature_flag_details: {flag_id: MATH_HINTS}}\n",
			turnWant{seen: mathDetails.seen, toolError: []string{"flag_id", `"HINTZ"`}}),
		flagInfo("flag details, text next to the call", "Show the math_hints flag.",
			"- reply: Let me look that up.\n  call: {functions.get_feature_flag_details: {flag_id: MATH_HINTS}}\n", mathDetails),
		// get_segments
		flagInfo("segments, explicit null", "Which segments are there?",
			"- call: {get_segments: {context: null}}\n", segments),
		flagInfo("segments, empty string", "Which segments are there?",
			`- call: {get_segments: {context: ""}}`+"\n", segments),
		flagInfo("segments, context in another case with blanks", "Which segments does assign-prog have?",
			`- call: {get_segments: {context: " ASSIGN-PROG"}}`+"\n", segments),
		flagInfo("segments, arguments encoded twice", "Which segments are there?",
			rawCall("Get_Segments", `"{\"context\": \"assign-prog\"}"`), segments),
		// find_segment
		flagInfo("find segment, name in another case with blanks", "Who is in the pilot schools?",
			`- call: {find_segment: {name: " Pilot Schools "}}`+"\n", pilot),
		flagInfo("find segment, part of a name", "Is there a club segment?",
			"- call: {find_segment: {name: CLUB}}\n", club),
		// get_segment_details
		flagInfo("segment details by name in another case", "Who is in the reading club?",
			`- call: {get_segment_details: {segment_id: "Reading Club "}}`+"\n", club),
		flagInfo("segment details by upper-case id", "Who is in segment {{id:pilot schools}}?",
			`- call: {get_segment_details: {segment_id: "{{upper:pilot schools}}"}}`+"\n", pilot),
		flagInfo("segment details, one key per call", "Who is in each segment?",
			parallel("get_segment_details: {segment_id: pilot schools}", "get_segment_details: {segment_id: reading club}"), club),
		// explain_feature_flag: groups written every way; u12 in class c7
		// gets Reading aid through its include list.
		flagInfo("explain, group as classId:c7", "Does u12 in class c7 get the reading aid?",
			`- call: {explain_feature_flag: {flag_id: READING_AID, user_id: u12, groups: "classId:c7"}}`+"\n", servedC7),
		flagInfo("explain, groups as a list of classId:c7", "Does u12 in class c7 get the reading aid?",
			`- call: {explain_feature_flag: {flag_id: READING_AID, user_id: u12, groups: ["classId:c7"]}}`+"\n", servedC7),
		flagInfo("explain, group as a pair", "Does u12 in class c7 get the reading aid?",
			"- call: {explain_feature_flag: {flag_id: READING_AID, user_id: u12, groups: {classId: c7}}}\n", servedC7),
		flagInfo("explain, groups as a map of lists", "Does u12 in class c7 get the reading aid?",
			"- call: {explain_feature_flag: {flag_id: READING_AID, user_id: u12, groups: {classId: [c7]}}}\n", servedC7),
		flagInfo("explain, groups as type and group_id", "Does u12 in class c7 get the reading aid?",
			"- call: {explain_feature_flag: {flag_id: READING_AID, user_id: u12, groups: [{type: classId, group_id: c7}]}}\n", servedC7),
		flagInfo("explain, blanks and case", "Does u12 in class c7 get the reading aid?",
			`- call: {explain_feature_flag: {flag_id: " reading_aid ", user_id: " u12 ", groups: {" classId ": [" c7 "]}, context: " Assign-Prog "}}`+"\n", servedC7),
		flagInfo("explain, null and empty optionals", "Does u12 get the reading aid?",
			`- call: {explain_feature_flag: {flag_id: Reading aid, user_id: u12, groups: null, context: ""}}`+"\n",
			turnWant{seen: []string{`"served":false`, "no groups were given"}}),
		flagInfo("explain, empty groups", "Does u12 get the reading aid?",
			"- call: {explain_feature_flag: {flag_id: READING_AID, user_id: u12, groups: {}}}\n",
			turnWant{seen: []string{`"served":false`, "no groups were given"}}),
		flagInfo("explain, user id as a number", "Does user 123 in class c7 get the reading aid?",
			"- call: {explain_feature_flag: {flag_id: READING_AID, user_id: 123, groups: {classId: c7}}}\n",
			turnWant{seen: []string{`"served":true`, `"user":"123"`}}),
		flagInfo("explain, a disabled flag", "Why doesn't u12 get math hints?",
			"- call: {explain_feature_flag: {flag_id: Math Hints, user_id: u12, groups: {classId: [c7]}}}\n",
			turnWant{seen: []string{`"served":false`, `"rule":"flag_not_enabled"`}}),
		flagInfo("explain, user id missing corrected", "Does u12 get the reading aid?",
			"- call: {explain_feature_flag: {flag_id: READING_AID, user_id: \"\"}}\n"+
				"- call: {explain_feature_flag: {flag_id: READING_AID, user_id: u12, groups: {classId: c7}}}\n",
			turnWant{seen: servedC7.seen, toolError: []string{"user_id"}}),
		// get_experiment_history
		flagInfo("history by name in another case", "When did Math Hints Live start?",
			`- call: {get_experiment_history: {experiment_id: " math hints live "}}`+"\n",
			turnWant{seen: []string{"{{id:Math Hints Live}}", "enrolling"}}),
		flagInfo("history by id prefix", "What happened to Math Hints?",
			`- call: {get_experiment_history: {experiment_id: "{{prefix:Math Hints}}"}}`+"\n",
			turnWant{seen: []string{"{{id:Math Hints}}", "no state change"}}),
		flagInfo("history by upper-case id, one key per call", "When did the running experiments start?",
			parallel(`get_experiment_history: {experiment_id: "{{upper:Stream Hints}}"}`, `get_experiment_history: {experiment_id: "{{id:Math Hints Live}}"}`),
			turnWant{seen: []string{"{{id:Stream Hints}}", "enrolling"}}),
		// A provider that ignores tool_choice writes the analyzer's call as
		// text; the lookups follow.
		{name: "tool_choice ignored, then a lookup", steps: []turnStep{{say: "Who is in the pilot schools?",
			llm: "- reply: '{\"name\": \"analyze_user_request\", \"arguments\": {\"intent_type\": \"needs_info\", \"confidence\": 0.9, \"user_request_summary\": \"Members.\", \"reasoning\": \"A segment.\"}}'\n" +
				"- call: {find_segment: {name: pilot schools}}\n- reply: I have what was asked.\n" + respond,
			want: turnWant{calls: 4, seen: pilot.seen}}}, backend: []check{seeded(), flagsSeeded()}},
		{name: "tool_choice ignored, explain in tool_call tags", steps: []turnStep{{say: "Does u12 in class c7 get the reading aid?",
			llm: "- reply: |-\n    <tool_call>\n    {\"name\": \"analyze_user_request\", \"arguments\": {\"intent_type\": \"needs_info\", \"confidence\": 0.9, \"user_request_summary\": \"Explain.\", \"reasoning\": \"A flag.\"}}\n    </tool_call>\n" +
				"- call: {explain_feature_flag: {flag_id: READING_AID, user_id: u12, groups: \"classId:c7\"}}\n- reply: I have what was asked.\n" + respond,
			want: turnWant{calls: 4, seen: servedC7.seen}}}, backend: []check{seeded(), flagsSeeded()}},
	})
}

// servedC7 is the explanation of Reading aid for u12 in class c7: served
// through the include list's group.
var servedC7 = turnWant{seen: []string{`"served":true`, `"c7"`, "{{id:READING_AID include}}"}}
