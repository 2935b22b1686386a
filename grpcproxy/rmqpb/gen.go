// Package rmqpb holds the Go types and the gRPC service of RocketMQ 5's
// apache.rocketmq.v2 protocol, generated from messaging.proto.
package rmqpb

//go:generate protoc --proto_path=. --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative messaging.proto
