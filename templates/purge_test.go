package templates

import (
	"context"
	"strings"
	"testing"

	"github.com/sluice-io/sluice/kafkaview"
)

// An internal topic is offered no purge (Kafka refuses DeleteRecords on
// it); a user topic is.
func TestPurgeFormNotOfferedForInternalTopics(t *testing.T) {
	render := func(internal bool) string {
		var b strings.Builder
		v := TopicView{Detail: &kafkaview.TopicDetail{Meta: kafkaview.TopicMeta{Name: "t", Internal: internal}}}
		if err := PurgeForm(v).Render(context.Background(), &b); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	if got := render(true); strings.Contains(got, "Preview purge") || !strings.Contains(got, "INVALID_TOPIC_EXCEPTION") {
		t.Fatalf("internal topic's purge panel: %s", got)
	}
	if got := render(false); !strings.Contains(got, "Preview purge") {
		t.Fatalf("user topic's purge panel: %s", got)
	}
}
