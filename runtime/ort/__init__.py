"""onnxruntime's glue, one concern a module:
- providers: provider names, availability and resolution (ProviderSpec), plugin libraries;
- settings: SessionSettings (what the user asked of every session) and the SessionOptions built
  from them; the user's text becomes SessionSettings in the CLI's SessionArgs group;
- model: the one hand-over of a ModelProto to onnxruntime (OrtModel, WeightedSession);
- sessions: every session of the project is created here (DmlExecutionProvider's needs in one place);
- assignment: which provider ran each node, and the findings on the operators this project owns."""
