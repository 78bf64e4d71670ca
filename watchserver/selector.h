// The selectors of a watch, in one include: LabelSelector
// (label_selector.h), FieldSelector (field_selector.h) and the WatchFilter
// that combines them with the watched resource (watch_filter.h).
//
// New code includes the header it needs. This one stays while the files
// that include it (watch_session.h, tests/integration/support/model.cc,
// tests/fuzz/http_request_fuzz.cc) are being reshaped by other changes;
// once those have landed, their includes move to the headers above and
// this file goes.
#ifndef WALWATCH_WATCHSERVER_SELECTOR_H_
#define WALWATCH_WATCHSERVER_SELECTOR_H_

#include "watchserver/field_selector.h"
#include "watchserver/label_selector.h"
#include "watchserver/watch_filter.h"

#endif  // WALWATCH_WATCHSERVER_SELECTOR_H_
