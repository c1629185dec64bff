package tracing

import "go.opentelemetry.io/otel/attribute"

// The OpenTelemetry semantic conventions (v1.40.0) the spans use, as
// constants: OTel's semconv packages build attribute values and lookup
// tables at init, which every command would pay for.
const (
	// SchemaURL is the schema of SemconvVersion.
	SchemaURL = "https://opentelemetry.io/schemas/" + SemconvVersion

	ServiceName    = attribute.Key("service.name")
	ServiceVersion = attribute.Key("service.version")
	ErrorTypeKey   = attribute.Key("error.type")

	GenAIOperationName          = attribute.Key("gen_ai.operation.name")
	GenAIProviderName           = attribute.Key("gen_ai.provider.name")
	GenAIAgentName              = attribute.Key("gen_ai.agent.name")
	GenAIConversationID         = attribute.Key("gen_ai.conversation.id")
	GenAIRequestModel           = attribute.Key("gen_ai.request.model")
	GenAIInputMessages          = attribute.Key("gen_ai.input.messages")
	GenAIOutputMessages         = attribute.Key("gen_ai.output.messages")
	GenAIResponseFinishReasons  = attribute.Key("gen_ai.response.finish_reasons")
	GenAIUsageInputTokens       = attribute.Key("gen_ai.usage.input_tokens")
	GenAIUsageOutputTokens      = attribute.Key("gen_ai.usage.output_tokens")
	GenAIToolName               = attribute.Key("gen_ai.tool.name")
	GenAIToolCallID             = attribute.Key("gen_ai.tool.call.id")
	GenAIToolType               = attribute.Key("gen_ai.tool.type")
	GenAIToolCallArguments      = attribute.Key("gen_ai.tool.call.arguments")
	GenAIToolCallResult         = attribute.Key("gen_ai.tool.call.result")
	GenAIOperationInvokeAgent   = "invoke_agent"
	GenAIOperationChat          = "chat"
	GenAIOperationExecuteTool   = "execute_tool"
	HTTPRequestMethod           = attribute.Key("http.request.method")
	HTTPRequestMethodOriginal   = attribute.Key("http.request.method_original")
	HTTPResponseStatusCode      = attribute.Key("http.response.status_code")
	URLFull                     = attribute.Key("url.full")
	ServerAddress               = attribute.Key("server.address")
	ServerPort                  = attribute.Key("server.port")
	NetworkProtocolName         = attribute.Key("network.protocol.name")
	NetworkProtocolVersion      = attribute.Key("network.protocol.version")
	httpRequestMethodOtherValue = "_OTHER"
)
