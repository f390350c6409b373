//! Generates the wire types from `proto/PulsarApi.proto` with a pure-Rust protobuf compiler
//! (protox), so building never needs `protoc` on the machine.

fn main() {
    println!("cargo:rerun-if-changed=proto/PulsarApi.proto");
    let descriptors = protox::compile(["PulsarApi.proto"], ["proto"]).expect("proto/PulsarApi.proto must compile");
    prost_build::Config::new()
        .bytes(["."])
        // Credentials travel in these; their Debug (src/protocol/redacted.rs) leaves them out.
        .skip_debug([".pulsar.proto.CommandConnect", ".pulsar.proto.AuthData"])
        // `prost::Name`: a decode error names the message type it failed on.
        .enable_type_names()
        .compile_fds(descriptors)
        .expect("prost code generation");
}
