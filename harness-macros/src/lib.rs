//! Procedural macros for the harness tag system.
//!
//! The one macro here is `#[derive(Tag)]`. It is re-exported by `harness-tags`, which is where
//! it is documented with examples; depend on `harness-tags`, not on this crate.
//!
//! ```text
//! /// Emitted when the kernel assembles the system prompt for an LLM call.
//! #[derive(Tag)]
//! #[tag(name = "prompt.system", phase = Think, payload = String, ctx = BaseCtx)]
//! pub struct PromptSystem;
//! ```
//!
//! The derive checks its input at compile time and points at the offending span: the name must
//! be `namespace.kebab-name`, the phase one of the known phases, `payload` and `ctx` must be
//! given, the struct must be a unit struct and it must carry a doc comment (the doc comment is
//! the tag's description in the catalog).

#![deny(clippy::print_stdout, clippy::print_stderr)]

use proc_macro::TokenStream;
use proc_macro2::Span;
use quote::quote;
use syn::spanned::Spanned;
use syn::{Attribute, DeriveInput, Expr, ExprLit, Ident, Lit, LitBool, LitStr, Meta, Type};

/// The phases a tag can declare, spelled as in `harness_tags::Phase`.
const PHASES: &[&str] = &[
    "Bootstrap",
    "Think",
    "Act",
    "Observe",
    "Verify",
    "Memory",
    "Complete",
    "Session",
];

/// Declares a tag: a zero-sized marker type with a name, a phase, a payload and a context.
///
/// See the `harness_tags::Tag` documentation for the attribute keys and an example.
#[proc_macro_derive(Tag, attributes(tag))]
pub fn derive_tag(input: TokenStream) -> TokenStream {
    let input = syn::parse_macro_input!(input as DeriveInput);
    match expand(&input) {
        Ok(tokens) => tokens.into(),
        Err(err) => err.to_compile_error().into(),
    }
}

struct TagArgs {
    name: LitStr,
    phase: Ident,
    payload: Type,
    ctx: Type,
    suppressible: bool,
    constrain: Option<syn::Path>,
}

fn expand(input: &DeriveInput) -> syn::Result<proc_macro2::TokenStream> {
    check_unit_struct(input)?;
    let args = parse_args(input)?;
    let doc = doc_comment(&input.attrs).ok_or_else(|| {
        syn::Error::new(
            input.ident.span(),
            "a tag needs a doc comment: it is the tag's description in the catalog \
             (say when the tag is emitted and what its reshaped payload changes)",
        )
    })?;

    let ident = &input.ident;
    let TagArgs {
        name,
        phase,
        payload,
        ctx,
        suppressible,
        constrain,
    } = args;
    let constrain = constrain.map(|path| {
        quote! {
            fn constrain(previous: &Self::Payload, next: Self::Payload) -> Self::Payload {
                #path(previous, next)
            }
        }
    });
    let payload_name = type_name(&payload);
    let ctx_name = type_name(&ctx);
    Ok(quote! {
        impl ::harness_tags::Tag for #ident {
            const NAME: &'static str = #name;
            const PHASE: ::harness_tags::Phase = ::harness_tags::Phase::#phase;
            const SUPPRESSIBLE: bool = #suppressible;
            type Payload = #payload;
            type Ctx = #ctx;

            #constrain

            fn descriptor() -> &'static ::harness_tags::TagDescriptor {
                static DESCRIPTOR: ::harness_tags::TagDescriptor =
                    ::harness_tags::__private::descriptor::<#ident>(
                        #doc,
                        #payload_name,
                        #ctx_name,
                        env!("CARGO_PKG_NAME"),
                        module_path!(),
                    );

                // The catalog is a link-time distributed slice: `link_section` is the unsafe part,
                // generated here so that the declaring crate can keep `deny(unsafe_code)`.
                #[allow(unsafe_code)]
                #[::harness_tags::__private::linkme::distributed_slice(::harness_tags::__private::TAGS)]
                #[linkme(crate = ::harness_tags::__private::linkme)]
                static ENTRY: ::harness_tags::__private::CatalogEntry =
                    <#ident as ::harness_tags::Tag>::descriptor;

                &DESCRIPTOR
            }
        }
    })
}

fn check_unit_struct(input: &DeriveInput) -> syn::Result<()> {
    let syn::Data::Struct(data) = &input.data else {
        return Err(syn::Error::new(
            input.ident.span(),
            "#[derive(Tag)] goes on a unit struct such as `pub struct PromptSystem;`",
        ));
    };
    if !matches!(data.fields, syn::Fields::Unit) {
        return Err(syn::Error::new(
            data.fields.span(),
            "a tag is a zero-sized marker: declare it as a unit struct (`pub struct MyTag;`); \
             the data goes in its payload type",
        ));
    }
    if !input.generics.params.is_empty() {
        return Err(syn::Error::new(
            input.generics.span(),
            "a tag cannot be generic: declare one marker type per tag",
        ));
    }
    Ok(())
}

fn parse_args(input: &DeriveInput) -> syn::Result<TagArgs> {
    let mut tag_attrs = input.attrs.iter().filter(|a| a.path().is_ident("tag"));
    let Some(attr) = tag_attrs.next() else {
        return Err(syn::Error::new(
            input.ident.span(),
            "missing #[tag(name = \"namespace.kebab-name\", phase = Think, payload = Type, ctx = Type)]",
        ));
    };
    if let Some(second) = tag_attrs.next() {
        return Err(syn::Error::new_spanned(
            second,
            "only one #[tag(...)] attribute is allowed",
        ));
    }

    let mut name: Option<LitStr> = None;
    let mut phase: Option<Ident> = None;
    let mut payload: Option<Type> = None;
    let mut ctx: Option<Type> = None;
    let mut suppressible = false;
    let mut constrain: Option<syn::Path> = None;

    attr.parse_nested_meta(|meta| {
        let key = meta
            .path
            .get_ident()
            .map(Ident::to_string)
            .unwrap_or_default();
        match key.as_str() {
            "name" => {
                let lit: LitStr = meta.value()?.parse()?;
                validate_name(&lit)?;
                name = Some(lit);
            }
            "phase" => {
                let ident: Ident = meta.value()?.parse()?;
                if !PHASES.contains(&ident.to_string().as_str()) {
                    return Err(syn::Error::new(
                        ident.span(),
                        format!(
                            "unknown phase `{ident}`; expected one of: {}",
                            PHASES.join(", ")
                        ),
                    ));
                }
                phase = Some(ident);
            }
            "payload" => payload = Some(meta.value()?.parse()?),
            "ctx" => ctx = Some(meta.value()?.parse()?),
            "suppressible" => {
                suppressible = if meta.input.peek(syn::Token![=]) {
                    meta.value()?.parse::<LitBool>()?.value
                } else {
                    true
                };
            }
            "constrain" => constrain = Some(meta.value()?.parse()?),
            _ => {
                return Err(meta.error(
                    "unknown tag attribute; expected `name`, `phase`, `payload`, `ctx`, \
                     `suppressible` or `constrain`",
                ));
            }
        }
        Ok(())
    })?;

    let missing = |what: &str, example: &str| {
        syn::Error::new_spanned(
            &attr.meta,
            format!("missing `{what}` in #[tag(...)], e.g. `{what} = {example}`"),
        )
    };
    Ok(TagArgs {
        name: name.ok_or_else(|| missing("name", "\"message.tool-result\""))?,
        phase: phase.ok_or_else(|| missing("phase", "Think"))?,
        payload: payload.ok_or_else(|| missing("payload", "String"))?,
        ctx: ctx.ok_or_else(|| missing("ctx", "BaseCtx"))?,
        suppressible,
        constrain,
    })
}

/// A name is `namespace.kebab-name`: two or more dot-separated segments, each made of lowercase
/// ASCII words of letters and digits joined by single hyphens, each segment starting with a letter.
fn validate_name(lit: &LitStr) -> syn::Result<()> {
    let value = lit.value();
    let segments: Vec<&str> = value.split('.').collect();
    let segment_ok = |s: &str| {
        s.starts_with(|c: char| c.is_ascii_lowercase())
            && s.split('-').all(|word| {
                !word.is_empty()
                    && word
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
            })
    };
    if segments.len() >= 2 && segments.iter().all(|s| segment_ok(s)) {
        Ok(())
    } else {
        Err(syn::Error::new(
            lit.span(),
            format!(
                "tag name `{value}` is not `namespace.kebab-name`: use two or more dot-separated \
                 segments of lowercase letters and digits, words joined by single hyphens, \
                 e.g. `message.tool-result` or `acme.billing.invoice-sent`"
            ),
        ))
    }
}

fn doc_comment(attrs: &[Attribute]) -> Option<String> {
    let lines: Vec<String> = attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .filter_map(|a| match &a.meta {
            Meta::NameValue(nv) => match &nv.value {
                Expr::Lit(ExprLit {
                    lit: Lit::Str(s), ..
                }) => Some(s.value()),
                _ => None,
            },
            _ => None,
        })
        .map(|line| {
            line.strip_prefix(' ')
                .unwrap_or(&line)
                .trim_end()
                .to_owned()
        })
        .collect();
    let text = lines.join("\n").trim().to_owned();
    (!text.is_empty()).then_some(text)
}

fn type_name(ty: &Type) -> LitStr {
    let rendered = quote!(#ty).to_string().replace(' ', "");
    LitStr::new(&rendered, Span::call_site())
}
