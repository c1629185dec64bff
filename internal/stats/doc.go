// Package stats holds the few statistics the results of an experiment
// need: Wilson score intervals for a proportion, Newcombe's interval for a
// difference of two proportions, Welch's interval for a difference of two
// means, and the chi-square goodness-of-fit test of a sample-ratio check.
//
// The distributions (normal, Student's t, chi-square) come from gonum's
// stat/distuv; this package only combines them. It knows nothing of
// UpGrade, HTTP or output: callers pass counts and summaries in and get
// numbers out.
package stats
