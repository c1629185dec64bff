package pipeline

// flagInfoKeys are the gathered_info entries of the feature flag and
// segment lookups: an action that declares actions.CacheFlags drops them.
var flagInfoKeys = []string{"feature_flags", "feature_flag_details", "segments", "segment_details", "flag_explanations"}
