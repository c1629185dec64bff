// Package flageval decides, in Go and without any request, whether UpGrade
// 6.5 serves a feature flag to a user, and names the rule that decided
// (upgrade-flags-segments.md, "Client evaluation"). The agent's
// explain_feature_flag lookup, `flags explain` and the simulator's
// /v6/featureflag all evaluate here, so they cannot disagree.
//
// It must not call the server: asking the client API records an exposure.
package flageval
