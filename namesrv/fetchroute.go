package namesrv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/rocketkv/rocketkv/remoting"
)

// ErrTopicNotExist is wrapped by FetchRoute's error when a name server
// answers TOPIC_NOT_EXIST: no broker registered the topic.
var ErrTopicNotExist = errors.New("no broker registered the topic")

// FetchRoute asks the name servers at addrs in turn for topic's route
// (GET_ROUTEINFO_BY_TOPIC), each within timeout, and returns the first
// route one of them gives. An answer of TOPIC_NOT_EXIST ends the search
// with an error wrapping ErrTopicNotExist; any other failure moves on to
// the next name server, and the last failure is returned when none gave a
// route. A route whose queue counts no broker can have (see
// QueueData.checkCounts) counts as a failure of its name server.
func FetchRoute(ctx context.Context, pool *remoting.ClientPool, addrs []string, topic string, timeout time.Duration) (TopicRouteData, error) {
	if len(addrs) == 0 {
		return TopicRouteData{}, fmt.Errorf("route of %s: %w", topic, ErrNoNameServer)
	}
	var lastErr error
	for _, addr := range addrs {
		cctx, cancel := context.WithTimeout(ctx, timeout)
		resp, err := pool.Invoke(cctx, addr, remoting.NewRequest(remoting.GetRouteInfoByTopic, remoting.Header{"topic": topic}, nil))
		cancel()
		switch {
		case err != nil:
			lastErr = fmt.Errorf("route of %s from name server %s: %w", topic, addr, err)
			continue
		case resp.Code == remoting.TopicNotExist:
			return TopicRouteData{}, fmt.Errorf("route of %s from name server %s: %w", topic, addr, ErrTopicNotExist)
		case resp.Code != remoting.Success:
			lastErr = fmt.Errorf("route of %s from name server %s: code %d: %s", topic, addr, resp.Code, resp.Remark)
			continue
		}
		route, err := decodeRoute(resp.Body)
		if err != nil {
			lastErr = fmt.Errorf("route of %s from name server %s: %w", topic, addr, err)
			continue
		}
		return route, nil
	}
	return TopicRouteData{}, lastErr
}

// decodeRoute reads a name server's GET_ROUTEINFO_BY_TOPIC answer body
// (standard JSON: a request of version 4.9.4 or later gets it from a Java
// name server too) and refuses a route whose queue counts no broker can
// have.
func decodeRoute(body []byte) (TopicRouteData, error) {
	var route TopicRouteData
	if err := json.Unmarshal(body, &route); err != nil {
		return TopicRouteData{}, fmt.Errorf("decode: %w", err)
	}
	if err := route.checkCounts(); err != nil {
		return TopicRouteData{}, err
	}
	return route, nil
}

// checkCounts refuses a route with a queue data that checkCounts
// refuses: one answer of 2^31 queues would have its reader build a list
// of as many.
func (r TopicRouteData) checkCounts() error {
	for _, q := range r.QueueDatas {
		if err := q.checkCounts(); err != nil {
			return err
		}
	}
	return nil
}
